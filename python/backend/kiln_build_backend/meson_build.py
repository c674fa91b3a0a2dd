"""What the wheel takes from an existing meson build of kiln: the project version and the built
libkiln / libkiln-compiler files, read from the build's own introspection files (meson-info/), and
brought up to date with ninja first."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import List, Optional


class BuildError(Exception):
    """The build folder cannot give a wheel: the message says what to do."""


class MesonBuild:
    """A configured meson build folder of kiln."""

    def __init__(self, folder: str) -> None:
        self.folder = os.path.abspath(folder)
        info = os.path.join(self.folder, "meson-info")
        if not os.path.isfile(os.path.join(info, "intro-projectinfo.json")):
            raise BuildError(
                f"no kiln build at {self.folder} (meson-info/ is missing): build kiln first "
                "(meson setup build --native-file scripts/llvm19-native.ini && ninja -C build, in the "
                "repository), or point KILN_BUILD_DIR (or --config-settings build-dir=...) at a build folder")
        with open(os.path.join(info, "intro-projectinfo.json"), encoding="utf-8") as f:
            project = json.load(f)
        if project.get("descriptive_name") != "kiln":
            raise BuildError(f"{self.folder} is a build of '{project.get('descriptive_name')}', not of kiln")
        self.version: str = project["version"]
        with open(os.path.join(info, "intro-targets.json"), encoding="utf-8") as f:
            self._targets = json.load(f)

    def shared_library(self, name: str) -> Optional[str]:
        """The file meson builds for shared_library(name) (for example capi/libkiln.so.0.1.0), or
        None when the build defines no such target."""
        for target in self._targets:
            if target.get("name") == name and target.get("type") == "shared library":
                return str(target["filename"][0])
        return None

    def bring_up_to_date(self, files: List[str]) -> None:
        """Runs ninja for just these files, so that the wheel never carries a stale library (a no-op
        when the build is current)."""
        ninja = shutil.which("ninja") or shutil.which("ninja-build")
        if ninja is None:
            raise BuildError("ninja is not on PATH: it is needed to bring the kiln build up to date")
        targets = [os.path.relpath(path, self.folder) for path in files]
        completed = subprocess.run([ninja, "-C", self.folder, *targets], capture_output=True, text=True)
        if completed.returncode != 0:
            raise BuildError(f"ninja -C {self.folder} {' '.join(targets)} failed:\n{completed.stdout}{completed.stderr}")
        for path in files:
            if not os.path.isfile(path):
                raise BuildError(f"{path} is missing after ninja ran")
