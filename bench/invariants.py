"""Check the stored memory's invariants from the database alone and print every violation.

    DATABASE_URL=postgresql://… .venv/bin/python bench/invariants.py        # exit 1 on any violation
    .venv/bin/python bench/invariants.py --json                            # machine-readable

Without DATABASE_URL the settings attach to the embedded development database (``.localai/data``), or to
the one under ``LOCALAI_MEMORY_DATA_DIR``. The checks are ``localai_memory.core.invariants``: every confirmed
proposal has exactly one change set, every file's text is its last change's "after", no version chain has
a gap, no row belongs to two owners. The load and fault runs call the same function at their end.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print the violations as JSON")
    parser.add_argument("--limit", type=int, default=50, help="rows reported per check")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "localai_memory.settings")
    # The settings refuse a DATABASE_URL without SECRET_KEY (each machine would sign with its own); this
    # check only reads rows, signs and decrypts nothing, so any key does.
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    import django

    django.setup()
    from localai_memory.core.invariants import check_invariants, summary

    started = time.monotonic()
    violations = check_invariants(limit=args.limit)
    elapsed = time.monotonic() - started
    if args.json:
        print(json.dumps({"violations": [{"check": v.check, "message": v.message, "row": v.row}
                                         for v in violations], "summary": summary(violations),
                          "seconds": round(elapsed, 2)}, default=str, indent=2))
    else:
        for violation in violations:
            print(violation)
        print(f"invariants: {len(violations)} violation(s) in {elapsed:.1f} s"
              + (f" {summary(violations)}" if violations else " — every check holds"))
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
