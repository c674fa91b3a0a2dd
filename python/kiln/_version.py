"""The package version: the wheel's (kiln's meson project version, recorded when the wheel was
built) or, in a source checkout, the one meson.build declares; one number, written in one place."""
from __future__ import annotations

import os
import re

from . import _library


def package_version() -> str:
    """kiln's version, "MAJOR.MINOR.PATCH"; "0+unknown" when neither source is readable."""
    if _library._build_info is not None:
        return str(_library._build_info.VERSION)
    meson_build = os.path.join(os.path.dirname(os.path.dirname(_library._PACKAGE_DIR)), "meson.build")
    try:
        with open(meson_build, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return "0+unknown"
    # project('kiln', ..., version: 'X.Y.Z', ...): the first version: keyword of the file.
    match = re.search(r"project\s*\(\s*'kiln'.*?\bversion\s*:\s*'([^']+)'", text, re.DOTALL)
    return match.group(1) if match else "0+unknown"
