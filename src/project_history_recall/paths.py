"""Path normalisation shared by attribution and scoping (pure: no I/O).

Mirrors the rules of Hermes's sidebar (``tui_gateway/project_tree.py``): Windows
-looking paths are casefolded and use ``/``, trailing separators are ignored and
ancestry is decided segment by segment, so ``/a/b`` is not an ancestor of ``/a/bc``.
"""

from __future__ import annotations

import posixpath
import re

_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:([\\/]|$)")
_UNC = re.compile(r"^\\\\")


def looks_windows(path: str) -> bool:
    return bool(_WINDOWS_DRIVE.match(path) or _UNC.match(path) or ("\\" in path and "/" not in path))


def path_key(path: str | None, home: str | None = None) -> str:
    """The comparable form of ``path``: ``""`` for nothing.

    ``~`` expands against ``home`` (passed in, so this stays pure). Windows
    paths are casefolded with ``/`` separators; POSIX paths keep their case.
    Redundant separators and ``.``/``..`` segments are collapsed.
    """
    if not path or not str(path).strip():
        return ""
    # Not stripped: ``shop``, ``shop `` and ``shop\n`` are three folders on POSIX.
    text = str(path)
    if home and (text == "~" or text.startswith(("~/", "~\\"))):
        text = home.rstrip("/\\") + text[1:]
    if looks_windows(text):
        unc = text.startswith("\\\\")
        text = text.replace("\\", "/")
        collapsed = posixpath.normpath(text)
        if unc:
            collapsed = "//" + collapsed.lstrip("/")
        return collapsed.rstrip("/").casefold() or "/"
    if not text.startswith("/"):
        # A relative path cannot be placed; keep it stable but distinct.
        return posixpath.normpath(text)
    collapsed = posixpath.normpath(text)
    if collapsed.startswith("//"):
        collapsed = "/" + collapsed.lstrip("/")
    return collapsed.rstrip("/") or "/"


def is_same_or_under(child_key: str, ancestor_key: str) -> bool:
    """Segment-wise ancestry over two *keys* (already normalised)."""
    if not child_key or not ancestor_key:
        return False
    if child_key == ancestor_key:
        return True
    if ancestor_key == "/":
        return child_key.startswith("/")
    return child_key.startswith(ancestor_key + "/")


def depth(key: str) -> int:
    return 0 if key in ("", "/") else key.strip("/").count("/") + 1


def relative_to(key: str, root_key: str) -> str | None:
    """``key`` relative to ``root_key`` (both normalised), or None when outside."""
    if not is_same_or_under(key, root_key):
        return None
    if key == root_key:
        return ""
    return key[len(root_key.rstrip("/")) + 1 :]
