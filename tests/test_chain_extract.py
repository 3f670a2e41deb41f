"""The pure rules of the edit chain: tool outcomes, diffs, V4A, symbols, placement, matching."""

from __future__ import annotations

import json

import pytest

from project_history_recall.index.diffs import parse_unified, parse_v4a, split_v4a
from project_history_recall.index.edit_phase import Placement
from project_history_recall.index.edits import (
    SAID_CHARS,
    Hints,
    extract_edits,
    render_edit,
    resolved_path,
    result_paths,
    string_argument,
    tool_outcome,
    tool_succeeded,
)
from project_history_recall.index.symbols import enclosing, hunk_symbol, symbol_at, symbol_from_text
from project_history_recall.services.code_history import (
    Round,
    match_paths,
    reconstruct,
    still_in_file,
    trim_patch,
    version_present,
)
from project_history_recall.sources import SourceMessage, ToolCall

# -- outcomes: the shapes Hermes's tools return (tools/file_tools.py, file_operations.py) --


@pytest.mark.parametrize(("result", "expected"), [
    ('{"success": true, "diff": "--- a/x\\n+++ b/x\\n"}', True),
    ('{"success": false, "error": "Could not find a match for old_string in the file"}', False),
    ('{"bytes_written": 12, "dirs_created": true, "resolved_path": "/r/x.py", "files_modified": ["/r/x.py"]}', True),
    ('{"bytes_written": 0, "dirs_created": false, "error": "Failed to write file: ..."}', False),
    ('{"error": "write_file: missing required field \'content\'."}', False),
    ('{"success": true, "error": "Apply phase failed"}', False),
    ("<persisted-output>\nThis tool result was too large...\n"
     '{"success": true, "diff": "--- a/x\\n+++ b/x\\n@@ -1', True),
    ('{"success": false, "diff": "...', False),
    ("Tool execution failed: RuntimeError: boom", None),
    ("[1, 2]", None),
    (None, None),
])
def test_tool_outcome(result, expected):
    assert tool_succeeded(result) is expected
    assert tool_outcome(result)[0] is expected  # the fast reading agrees with the parse


# -- diffs -----------------------------------------------------------------------

PROSE = """I changed two files:

```diff
diff --git a/src/a.py b/src/a.py
index 1111111..2222222 100644
--- a/src/a.py
+++ b/src/a.py
@@ -10,3 +10,3 @@ def load(path):
     data = read(path)

-    return data
+    return parse(data)
diff --git a/docs/new.md b/docs/new.md
new file mode 100644
--- /dev/null
+++ b/docs/new.md
@@ -0,0 +1,2 @@
+# New
+text
```
That is all.
+ not part of any diff
"""


def test_parse_git_diffs_in_prose():
    files = parse_unified(PROSE)
    assert [(f.old_path, f.new_path) for f in files] == [("src/a.py", "src/a.py"), (None, "docs/new.md")]
    hunk = files[0].hunks[0]
    assert hunk.funcname == "def load(path):"
    assert hunk.lines == ("     data = read(path)", " ", "-    return data", "+    return parse(data)")
    assert files[1].hunks[0].new == ["# New", "text"]


def test_a_hunk_shorter_than_its_header_is_not_a_diff():
    assert parse_unified("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-a\n+b\nprose follows") == []


def test_hermes_result_diff_with_absolute_labels():
    files = parse_unified("--- a//repo/src/x.py\n+++ b//repo/src/x.py\n@@ -1,2 +1,2 @@\n-a\n+b\n c\n")
    assert files[0].path == "/repo/src/x.py"


def test_v4a_is_read_by_hermes_parser():
    ops = parse_v4a("*** Begin Patch\n*** Update File: src/a.py\n@@ def load @@\n def load(path):\n"
                    "-    return 1\n+    return 2\n*** Add File: src/b.py\n+x = 1\n+y = 2\n"
                    "*** Delete File: old.py\n*** End Patch")
    assert ops is not None
    assert [(o.kind, o.path) for o in ops] == [("update", "src/a.py"), ("add", "src/b.py"), ("delete", "old.py")]
    assert ops[0].hunks[0].funcname == "def load"
    assert ops[1].content == "x = 1\ny = 2"
    assert parse_v4a("*** Begin Patch\n*** Update File: a.py\n*** End Patch") is None  # Hermes: no hunks


def test_v4a_sections_split_like_hermes_reads_them():
    text = ("*** Begin Patch\n*** Update File: src/a.py\n@@ def load @@\n-    return 1\n+    return 2\n"
            "***Add File: src/b.py\n+x = 1\n*** Move File: c.py -> d.py\n*** Delete File: old.py\n*** End Patch\n"
            "*** Update File: after-the-end.py\n")
    parts = split_v4a(text)
    assert [(k, p) for k, p, _ in parts] == [("update", "src/a.py"), ("add", "src/b.py"), ("delete", "old.py")]
    ops = parse_v4a(parts[0][2])
    assert ops is not None and ops[0].hunks[0].changed == ["-    return 1", "+    return 2"]
    assert render_edit("add", "src/b.py", parts[1][2], None, None).content == "x = 1"


# -- symbols ---------------------------------------------------------------------


@pytest.mark.parametrize(("line", "name"), [
    ("def load(path):", "load"),
    ("    async def fetch(self, url):", "fetch"),
    ("class Config(Base):", "Config"),
    ("export async function handler(req, res) {", "handler"),
    ("export const useThing = (a: number) => {", "useThing"),
    ("func (s *Server) Handle(w http.ResponseWriter, r *http.Request) {", "Handle"),
    ("pub(crate) fn parse(input: &str) -> Result<Ast> {", "parse"),
    ("  public static int count(String s) {", "count"),
    ("    if (ready) {", None),
    ("    return value", None),
])
def test_definitions(line, name):
    assert symbol_from_text(line) == name or (name is None and symbol_from_text(line) in (None, "ready"))
    from project_history_recall.index.symbols import definition

    found = definition(line)
    assert (found.name if found else None) == name


def test_enclosing_qualifies_methods_and_follows_decorators():
    lines = ["class Client:", "    timeout = 5", "", "    @cached", "    def search(self, q):",
             "        q = q.strip()", "        return q", "", "x = 1"]
    assert enclosing(lines, 5) == "Client.search"
    assert enclosing(lines, 3) == "Client.search"
    assert enclosing(lines, 1) == "Client"
    assert enclosing(lines, 8) is None


def test_hunk_symbol_prefers_its_own_lines_then_git_context():
    hunk = parse_unified("--- a/x\n+++ b/x\n@@ -5,2 +5,2 @@ class Client:\n"
                         "     def run(self):\n-        a\n+        b\n")
    assert hunk_symbol(hunk[0].hunks[0]) == "run"
    hunk = parse_unified("--- a/x\n+++ b/x\n@@ -5,1 +5,1 @@ def outer(x):\n-        a\n+        b\n")
    assert hunk_symbol(hunk[0].hunks[0]) == "outer"


def test_symbol_at_refuses_to_guess():
    text = "def a():\n    x = 1\n\n\ndef b():\n    x = 1\n    y = 2\n"
    assert symbol_at(text, "    y = 2") == "b"
    assert symbol_at(text, "    x = 1") is None  # occurs twice
    assert symbol_at(text, "    z = 3") is None


# -- extraction --------------------------------------------------------------------


def messages(*items):
    out, ids = [], iter(range(1, 1000))
    for role, content, *extra in items:
        kw = extra[0] if extra else {}
        out.append(SourceMessage(next(ids), role, content, float(len(out)), **kw))
    return out


def call(call_id, name, args):
    return {"tool_calls": (ToolCall(call_id, name, json.dumps(args)),)}


def result(call_id, payload):
    return {"tool_call_id": call_id, "tool_name": "patch"}, payload


def place(raw, result, repo_relative):
    return raw.removeprefix("/repo/"), "/repo/" + raw.removeprefix("/repo/")


def test_extract_drops_failed_and_unanswered_edits_and_keeps_the_words():
    long_request = "please " + "really " * 80 + "fix it"
    msgs = messages(
        ("user", "fix the timeout"),
        ("assistant", "", call("c1", "patch", {"path": "a.py", "old_string": "x = 1", "new_string": "x = 2"})),
        ("tool", '{"success": false, "error": "Could not find"}', {"tool_call_id": "c1"}),
        ("assistant", "", call("c2", "patch", {"path": "a.py", "old_string": "y = 1", "new_string": "y = 2"})),
        ("tool", '{"success": true}', {"tool_call_id": "c2"}),
        ("user", long_request),
        ("assistant", "", call("c3", "write_file", {"path": "b.py", "content": "print(1)\n"})),
        ("tool", '{"bytes_written": 9}', {"tool_call_id": "c3"}),
        ("assistant", "", call("c4", "write_file", {"path": "c.py", "content": "never ran"})),
    )
    edits = extract_edits(msgs, place)
    assert [(e.path, e.form, e.message_id) for e in edits] == [("a.py", "replace", 4), ("b.py", "write", 7)]
    assert edits[0].said == "fix the timeout" and edits[0].said_message_id == 1
    assert len(edits[1].said or "") == SAID_CHARS and edits[1].said_message_id == 6
    # The patch is made when asked for: from the two strings when Hermes's result had no diff.
    first = render_edit(edits[0].form, edits[0].path, edits[0].raw, edits[0].old_text, edits[0].new_text)
    assert first.patch == "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-y = 1\n+y = 2"
    write = render_edit(edits[1].form, edits[1].path, edits[1].raw, edits[1].old_text, edits[1].new_text)
    assert "(previous content unknown)" in write.patch and write.content == "print(1)\n"


def test_string_arguments_are_read_without_a_parse_only_when_plain():
    args = json.dumps({"mode": "replace", "path": "src/a.py", "old_string": 'x = "path": "no"', "new_string": "y"})
    assert string_argument(args, "path") == "src/a.py"
    assert string_argument(args, "mode") == "replace"
    assert string_argument('{"path":"a b.py"}', "path") == "a b.py"
    assert string_argument(json.dumps({"path": 'we\\ird"name.py'}), "path") is None  # escapes: parse instead
    assert string_argument(json.dumps({"content": '"path": "x"'}), "path") is None  # only an escaped lookalike


def test_a_replace_with_hermes_diff_keeps_the_diff_and_its_context():
    diff = "--- a//r/a.py\n+++ b//r/a.py\n@@ -4,3 +4,3 @@\n def load(p):\n-    return 1\n+    return 2\n \n"
    result = json.dumps({"success": True, "diff": diff, "files_modified": ["/r/a.py"], "resolved_path": "/r/a.py"})
    msgs = messages(("user", "return two"), ("assistant", "", call("c1", "patch", {
        "mode": "replace", "path": "a.py", "old_string": "return 1", "new_string": "return 2"})),
        ("tool", result, {"tool_call_id": "c1"}))
    [edit] = extract_edits(msgs, place)
    shown = render_edit(edit.form, edit.path, edit.raw, edit.old_text, edit.new_text)
    assert shown.symbol == "load"
    assert shown.patch.startswith("--- a/a.py\n+++ b/a.py\n@@ -4,3 +4,3 @@\n def load(p):")


def test_sessions_without_edits_cost_nothing():
    msgs = messages(("user", "hi"), ("assistant", "", call("c1", "read_file", {"path": "a.py"})))
    assert extract_edits(msgs, place) == []


def test_paths_hermes_reports():
    result = json.dumps({"success": True, "diff": '"resolved_path": "/not/this"',
                         "files_modified": ["/r/a.py", "/r/b \\\"q\\\".py"], "resolved_path": "/r/a.py"})
    assert resolved_path(result) == "/r/a.py"
    assert result_paths(result) == ("/r/a.py", '/r/b \\"q\\".py')
    assert list(Hints(result)) == ["/r/a.py", '/r/b \\"q\\".py']
    assert result_paths('{"bytes_written": 3}') == ()


# -- placement ---------------------------------------------------------------------


def test_placement_relative_to_the_checkout():
    main = Placement("/repo/src", "/repo", "/repo")
    assert main.place("app.py", (), False) == ("src/app.py", "/repo/src/app.py")
    assert main.place("/repo/lib/x.py", (), False) == ("lib/x.py", "/repo/lib/x.py")
    assert main.place("x.py", ("/elsewhere/x.py",), False) == ("x.py", "/elsewhere/x.py")  # where Hermes wrote
    assert main.place("/etc/hosts", (), False) == ("/etc/hosts", "/etc/hosts")
    assert main.place("./lib/x.py", (), True) == ("lib/x.py", "/repo/lib/x.py")
    nested = Placement("/repo/.worktrees/f", "/repo/.worktrees/f", "/repo")  # a worktree inside the repo
    assert nested.place("src/a.py", (), False) == ("src/a.py", "/repo/.worktrees/f/src/a.py")
    nowhere = Placement(None, None, None)
    assert nowhere.place("src/a.py", (), False) == ("src/a.py", None)


# -- query side -----------------------------------------------------------------------


def test_match_paths_tiers():
    known = [("src/app/search.py", "/r/src/app/search.py"), ("tests/search.py", None), ("src/app/retry.py", None)]
    assert match_paths(known, "src/app/search.py") == ["src/app/search.py"]
    assert match_paths(known, "app/search.py") == ["src/app/search.py"]
    assert sorted(match_paths(known, "search.py")) == ["src/app/search.py", "tests/search.py"]
    assert match_paths(known, "/r/src/app/search.py") == ["src/app/search.py"]
    assert sorted(match_paths(known, "src/app")) == ["src/app/retry.py", "src/app/search.py"]
    assert match_paths(known, "arch.py") == []  # segment-wise, not a substring


def make_round(form, *, branch="main", old=None, new=None, patch=""):
    rendered = render_edit(form, "a.py", patch or None, old, new)
    return Round("s", 1, 0, 0.0, "a.py", None, form, old, new, None, branch, None, rendered.patch,
                 rendered.symbol, rendered.anchor, rendered.content, form != "write", rendered.hunks)


def test_reconstruct_follows_one_branch_only():
    first = make_round("write", new="a = 1\nb = 2\n")
    edit = make_round("replace", old="b = 2", new="b = 3")
    elsewhere = make_round("write", branch="other", new="zzz\n")
    again = make_round("write", new="a = 1\nb = 3\nc = 4\n")
    reconstruct([first, edit, elsewhere, again])
    assert not first.base_known and not elsewhere.base_known
    assert again.base_known
    assert [line for line in again.patch.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")] == [
        "+c = 4"]


def test_version_present():
    text = "def f():\n    return 2\n"
    assert version_present(text, make_round("replace", old="return 1", new="return 2")) is True
    assert version_present(text, make_round("replace", old="return 2", new="return 3")) is False
    assert version_present(text + "\n\n", make_round("write", new=text)) is True
    hunk = "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n"
    assert version_present(text, make_round("diff", patch=hunk)) is True
    assert version_present("def f():\n    return 1\n", make_round("diff", patch=hunk)) is False
    v4a = "*** Update File: a.py\n@@ def f @@\n def f():\n-    return 1\n+    return 2"
    assert version_present(text, make_round("v4a", patch=v4a)) is True
    added = "*** Add File: a.py\n+def f():\n+    return 2"
    assert version_present(text, make_round("add", patch=added)) is True
    assert version_present(text, make_round("diff", patch="")) is None


def test_a_deleted_file_is_still_deleted(tmp_path):
    gone = make_round("delete", patch="*** Delete File: a.py")
    gone.abs_path = str(tmp_path / "a.py")
    assert still_in_file(gone, [str(tmp_path)]) is True
    (tmp_path / "a.py").write_text("back\n")
    assert still_in_file(gone, [str(tmp_path)]) is False


def test_trim_patch():
    patch = "\n".join(f"+line {i}" for i in range(100))
    trimmed, cut = trim_patch(patch, 60)
    assert cut and len(trimmed) < 90 and trimmed.endswith("more lines]")
    assert trim_patch("short", 60) == ("short", False)
