"""Import as the API and the terminal take it in, so they agree.

``import_upload`` reads an uploaded file the one way both read it: an export zip, or a list of facts as
plain text. A file that is neither (not UTF-8, a file named .zip that is no zip; another tool's JSON is refused
by ``importing.parse_facts``) is a 400 that says what was expected, before anything is written.
"""

from __future__ import annotations

from django.core.files.uploadedfile import UploadedFile

from localai_memory.core.errors import InvalidInput, TooLarge

from . import importing

#: What an import says of an uploaded file that is neither a zip nor text.
NOT_TEXT = ("The file is neither a zip nor UTF-8 text. Import the zip that Export makes, or a list of facts as "
            "plain text, one fact a line.")


def read_upload(upload: UploadedFile) -> bytes:
    """An uploaded file's bytes; TooLarge (413) past the largest zip, before it is read into memory."""
    if (upload.size or 0) > importing.ZIP_MAX_BYTES:
        raise TooLarge(f"The file is larger than {importing.ZIP_MAX_BYTES} bytes.", code="import_too_large")
    return upload.read()


def import_upload(*, owner_id: int, data: bytes, name: str = "", actor: str = "you") -> importing.ImportResult:
    """Import an uploaded file (``name`` as it was uploaded, "" when unknown): a zip as an export, anything else
    as a list of facts. Raises as ``importing.import_zip`` and ``import_facts`` do, and InvalidInput (400
    ``invalid_import``) for a file named .zip that is not one, or one that is not UTF-8 text."""
    if importing.is_zip(data):
        return importing.import_zip(owner_id=owner_id, data=data, actor=actor)
    if name.lower().endswith(".zip"):  # a damaged download, or another program's archive: not a list of facts
        raise InvalidInput(f"“{name[-100:]}” is named .zip but is not a zip file. Import the zip that Export "
                           "makes, or a list of facts as plain text, one fact a line.", code="invalid_import")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(NOT_TEXT, code="invalid_import") from None
    return importing.import_facts(owner_id=owner_id, text=text, actor=actor)
