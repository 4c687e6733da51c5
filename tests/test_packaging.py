"""Release metadata: one source for the version, the license files, a changelog that starts with this release, and
a long description (README, then CHANGELOG) that renders on a package index. The built sdist and wheel themselves
are checked by tests/compat (``make test-compat``: ``python -m build``, ``twine check``, installs of both)."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

import readme_renderer.markdown
from setuptools.config.expand import read_attr

import airflow_tablestore

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt, the standard text
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
# The address project.urls used to name: no such repository exists.
FAKE_REPOSITORY = "github.com/airflow-tablestore"


def _long_description_files() -> list[str]:
    readme = PYPROJECT["tool"]["setuptools"]["dynamic"]["readme"]
    assert readme["content-type"] == "text/markdown"
    files: list[str] = readme["file"]
    return files


def test_version_has_one_source() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "airflow_tablestore.__version__"}
    # what setuptools writes into the metadata of the sdist, the wheel and an editable install
    assert read_attr("airflow_tablestore.__version__", root_dir=REPO) == airflow_tablestore.__version__


def test_changelog_starts_with_this_release() -> None:
    headings = re.findall(r"^## (\S+) — (\d{4}-\d{2}-\d{2})$", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert headings and headings[0][0] == airflow_tablestore.__version__, headings


def test_license_files() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE", "NOTICE"]
    assert hashlib.sha256((REPO / "LICENSE").read_bytes()).hexdigest() == APACHE_2_0_SHA256
    notice = (REPO / "NOTICE").read_text()
    assert "Copyright 2026 The airflow-tablestore authors" in notice
    for proto in sorted((REPO / "airflow_tablestore" / "protocol").glob("*.proto")):
        assert proto.name in notice  # the protocol definitions NOTICE accounts for


def test_long_description_has_no_relative_links() -> None:
    """Relative links break on a package index page: links are absolute, paths are plain text."""
    assert _long_description_files() == ["README.md", "CHANGELOG.md"]
    for name in _long_description_files():
        text = (REPO / name).read_text()
        relative = [target for target in re.findall(r"\]\(([^)\s]+)[^)]*\)", text)
                    if not target.startswith(("https://", "http://", "#"))]
        relative += re.findall(r"""(?:href|src)=["'](?!https?://)([^"']+)""", text)
        assert not relative, f"{name}: relative links {relative}"
        assert FAKE_REPOSITORY not in text, name


def test_paths_the_readme_names_are_shipped_in_the_sdist() -> None:
    readme = (REPO / "README.md").read_text()
    named = set(re.findall(r"\bdocs/[\w.-]+\.md\b", readme))
    assert named and all((REPO / path).is_file() for path in named), named
    manifest = (REPO / "MANIFEST.in").read_text().splitlines()
    assert "recursive-include docs *.md" in manifest
    assert any(line.startswith("include ") and "CHANGELOG.md" in line and "BENCHMARKS.md" in line
               for line in manifest)


def test_no_project_url_names_a_repository_that_does_not_exist() -> None:
    urls = PYPROJECT["project"].get("urls", {})
    assert not [url for url in urls.values() if FAKE_REPOSITORY in url]
    assert FAKE_REPOSITORY not in (REPO / "pyproject.toml").read_text()


def test_long_description_renders() -> None:
    """Rendered as the package index renders it (readme-renderer, GitHub-flavoured Markdown; ``twine check`` does
    not render Markdown): both files' headings are there and every link in the HTML is absolute."""
    text = "\n".join((REPO / name).read_text() for name in _long_description_files())
    html = readme_renderer.markdown.render(text)
    assert html is not None
    headings = re.findall(r"<h1[^>]*>([^<]*)<", html)
    assert headings == ["airflow-tablestore", "Changelog"], headings
    hrefs = re.findall(r'(?:href|src)="([^"]*)"', html)
    assert not [href for href in hrefs if not href.startswith(("https://", "http://", "#"))], hrefs
