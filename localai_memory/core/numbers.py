"""Numbers as clients write them."""

from __future__ import annotations


def whole_number(raw: object, *, canonical: bool = False, max_digits: int = 18) -> int | None:
    """``raw`` as a whole number when it is ASCII digits only (``²`` or ``١`` are digits to Python, not to an
    id), at most ``max_digits`` long; with ``canonical``, also without a leading zero. Else None."""
    if not isinstance(raw, str) or not raw.isascii() or not raw.isdigit() or len(raw) > max_digits:
        return None
    return None if canonical and str(int(raw)) != raw else int(raw)
