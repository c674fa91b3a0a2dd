"""The wheel's METADATA (core metadata 2.1), from the [project] table of python/pyproject.toml plus
the version of the kiln build. Only the keys kiln's pyproject.toml uses are understood; any other
is refused by name, so that metadata is never silently dropped."""
from __future__ import annotations

import os
import re
from typing import Any, Dict

try:
    import tomllib
except ImportError:  # Python < 3.11: the build requirement `tomli` (pyproject.toml)
    import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]

_KNOWN_KEYS = {"name", "dynamic", "description", "readme", "requires-python", "license", "dependencies"}


def read_project(project_folder: str) -> Dict[str, Any]:
    """The [project] table of PROJECT_FOLDER/pyproject.toml, checked for keys this backend writes."""
    with open(os.path.join(project_folder, "pyproject.toml"), "rb") as f:
        project: Dict[str, Any] = tomllib.load(f)["project"]
    unknown = sorted(set(project) - _KNOWN_KEYS)
    if unknown:
        raise ValueError(f"unsupported: pyproject.toml [project] keys {unknown}; kiln's build backend "
                         f"(python/backend) writes only {sorted(_KNOWN_KEYS)}")
    if project.get("dynamic") != ["version"]:
        raise ValueError("pyproject.toml: [project] must say dynamic = [\"version\"]: the version is kiln's "
                         "meson project version")
    return project


def distribution_name(project: Dict[str, Any]) -> str:
    """The name as wheel file names and .dist-info folders spell it."""
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def metadata_text(project: Dict[str, Any], version: str, project_folder: str) -> str:
    """METADATA's text."""
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {version}"]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "license" in project:
        lines.append(f"License: {project['license']['text']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Requires-Dist: {requirement}" for requirement in project.get("dependencies", [])]
    body = ""
    if "readme" in project:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(project_folder, project["readme"]), encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body
