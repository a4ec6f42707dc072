"""A memory provider add-on for the tests. It runs while the file named by SAMPLE_PROVIDER_DOWN is absent."""

from __future__ import annotations

import os


class SampleProvider:
    name = "sample"
    label = "Sample memory add-on"
    provides = ["memory"]

    def is_running(self) -> bool:
        flag = os.environ.get("SAMPLE_PROVIDER_DOWN_FILE", "")
        return not (flag and os.path.exists(flag))
