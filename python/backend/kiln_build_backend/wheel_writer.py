"""Writes a wheel (a zip archive with a .dist-info folder and its RECORD of hashes, as the binary
distribution format specifies) from (name in the archive, bytes, executable) entries. The archive is
reproducible: fixed timestamps and a sorted order."""
from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from typing import Iterable, Tuple

Entry = Tuple[str, bytes, bool]  # archive name, content, executable
_TIMESTAMP = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip can hold: no build time in the wheel


def _record_hash(content: bytes) -> str:
    digest = hashlib.sha256(content).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def write_wheel(path: str, dist_info: str, entries: Iterable[Entry]) -> None:
    """Writes the wheel at `path`; `dist_info` is its NAME-VERSION.dist-info folder, whose RECORD
    is added last."""
    entries = sorted(entries)
    record_name = f"{dist_info}/RECORD"
    record = "".join(f"{name},{_record_hash(content)},{len(content)}\n" for name, content, _ in entries)
    record += f"{record_name},,\n"
    temporary = path + ".part"
    with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content, executable in entries + [(record_name, record.encode(), False)]:
            info = zipfile.ZipInfo(name, date_time=_TIMESTAMP)
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, content)
    os.replace(temporary, path)
