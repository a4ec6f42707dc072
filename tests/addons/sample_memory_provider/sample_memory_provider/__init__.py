"""A memory provider add-on for the tests. It runs unless SAMPLE_PROVIDER_DOWN=1 is set."""

from __future__ import annotations

import os


class SampleProvider:
    name = "sample"
    label = "Sample memory add-on"
    provides = ["memory"]

    def is_running(self) -> bool:
        return os.environ.get("SAMPLE_PROVIDER_DOWN") != "1"
