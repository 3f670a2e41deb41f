"""Turns a session's topic into messages that look like a coding-agent transcript.

A session is about one term of its project (plus a second one, a problem, an
action); every message mentions some of them in English, Chinese or a mix,
and the assistant calls tools (``terminal``, ``read_file``, ``patch``,
``write_file``) whose JSON arguments and results carry the identifiers. All
randomness comes from the ``random.Random`` passed in, so one seed gives one
transcript.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace

from .vocab import ACTIONS, EN_FILLER, ERRORS, PROBLEMS, STATES, VERBS, ZH_FILLER, ProjectSpec, Term

LANGS = ("en", "zh", "mixed")


def _past(verb: str) -> str:
    return {"build": "built", "emit": "emitted"}.get(verb, verb + ("d" if verb.endswith("e") else "ed"))


@dataclass(frozen=True)
class Topic:
    """What one session is about; every message draws its words from here."""

    spec: ProjectSpec
    lang: str
    main: Term
    other: Term
    problem: Term
    action: Term
    state: Term
    verb: str
    error: str
    extra: str

    @classmethod
    def draw(cls, rng: random.Random, spec: ProjectSpec, lang: str) -> Topic:
        main = rng.choice(spec.terms)
        other = rng.choice([t for t in spec.terms if t != main] or [main])
        return cls(spec, lang, main, other, rng.choice(PROBLEMS), rng.choice(ACTIONS), rng.choice(STATES),
                   rng.choice(VERBS), rng.choice(ERRORS[spec.lang]), rng.choice(spec.extras))

    @property
    def file(self) -> str:
        return self.spec.file_for(self.main)

    @property
    def test(self) -> str:
        return self.spec.test_for(self.main)

    @property
    def func(self) -> str:
        return self.spec.function_for(self.verb, self.main)

    @property
    def func2(self) -> str:
        return self.spec.function_for("handle", self.other)

    @property
    def cmd(self) -> str:
        return self.spec.test_command(self.main)

    def title(self) -> str:
        if self.lang == "zh":
            return f"{self.action.zh}{self.main.zh}的{self.problem.zh}"
        return f"{self.action.en.capitalize()} {self.main.en} {self.problem.en}"


def _words(t: Topic) -> dict[str, str]:
    return {
        "action": t.action.en, "main": t.main.en, "other": t.other.en, "problem": t.problem.en,
        "state": t.state.en, "action_zh": t.action.zh, "main_zh": t.main.zh, "other_zh": t.other.zh,
        "problem_zh": t.problem.zh, "state_zh": t.state.zh, "file": t.file, "test": t.test, "func": t.func,
        "func2": t.func2, "cls": t.main.camel, "error": t.error, "extra": t.extra, "cmd": t.cmd,
    }


EN_USER = (
    "Can you {action} {func} in {file}? It hits a {problem} when the {other} is {state}.",
    "Why does {func} raise {error} after the {main} change? I think the {other} is involved.",
    "The {main} code has a {problem} again. Here is the trace: {error} in {file}.",
    "Before we ship, {action} the {main} handling and double-check {extra}.",
    "Follow-up on {cls}: the {other} path still shows a {problem}.",
    "What did we decide about the {main}? I remember something about {other} being {state}.",
)
EN_ASSISTANT = (
    "I read {file}. {func} calls {func2} before the {other} is {state}, so the {problem} shows up under load. "
    "I will {action} it and add a case in {test}.",
    "Done: {func} now checks the {other} first, and `{cmd}` passes.",
    "The {error} comes from {cls}: it assumes the {main} is never {state}. I changed the guard and left {extra} "
    "as it was.",
    "Summary: the {problem} in the {main} code was caused by {func2}. We agreed to keep {cls} backwards "
    "compatible and to log when the {other} is {state}.",
    "Two options for the {main}: retry inside {func}, or let the caller handle a {problem}. The first is simpler "
    "and keeps {func2} unchanged, so I went with it.",
)
ZH_USER = (
    "帮我{action_zh}一下 {file} 里的 {func}，{other_zh}{state_zh}的时候会出现{problem_zh}。",
    "{main_zh}这块又出现{problem_zh}了，报错是 {error}，在 {file}。",
    "为什么改了{main_zh}之后 {func} 会报 {error}？我怀疑和{other_zh}有关。",
    "上线前把{main_zh}的逻辑{action_zh}一下，顺便检查 {extra}。",
    "上次{main_zh}的{problem_zh}最后是怎么解决的？",
)
ZH_ASSISTANT = (
    "我看了 {file}。{func} 在{other_zh}{state_zh}之前就调用了 {func2}，所以高并发下会出现{problem_zh}。"
    "我来{action_zh}，并在 {test} 里补一个用例。",
    "改好了：{func} 现在会先检查{other_zh}，`{cmd}` 已经通过。",
    "{error} 来自 {cls}：它假设{main_zh}不会{state_zh}。我改了判断条件，{extra} 保持不变。",
    "总结一下：{main_zh}的{problem_zh}是 {func2} 引起的。我们决定保持 {cls} 向后兼容，{other_zh}{state_zh}时打日志。",
)
MIXED_USER = (
    "我今天在改 {main} 的 {func}，{problem_zh}还是没解决，log 里是 {error}。",
    "{other} 那块 {state} 的时候 {func2} 会出问题，can you take a look at {file}?",
    "帮我 {action} 一下 {cls}，{main_zh}相关的 test 一直 flaky。",
)
MIXED_ASSISTANT = (
    "看了一下 {file}：{func} 在 {other} {state} 的时候没有处理，所以会 {problem}。我加了 guard，并补了 {test}。",
    "OK，{cls} 已经改好，`{cmd}` 通过。{main_zh}的{problem_zh}应该不会再出现了。",
)
EN_DETAIL = ("It failed {n} times in the last hour.", "p99 latency went from {a} ms to {b} ms.",
             "See line {line} of {file}.", "The job processed {n} rows.", "This started after v{version}.")
ZH_DETAIL = ("过去一小时失败了 {n} 次。", "p99 延迟从 {a} ms 涨到 {b} ms。", "见 {file} 第 {line} 行。",
             "这个任务处理了 {n} 行数据。", "从 v{version} 版本开始出现的。")
TOOL_INTRO_EN = ("Let me look at {file}.", "Running the tests first.", "Checking where {func} is used.", "")
TOOL_INTRO_ZH = ("我先看一下 {file}。", "先跑一下测试。", "看看 {func} 在哪里被调用。", "")


class SessionText:
    """Generates the messages of one session, one call per message kind."""

    def __init__(self, rng: random.Random, topic: Topic) -> None:
        self.rng = rng
        self.session_topic = topic
        self.topic = topic
        self.words = _words(topic)
        self.calls = 0

    def _drift(self) -> None:
        """A conversation wanders: the second term, state, problem and verb change now and then
        (the main term stays), and numbers differ, so messages are rarely verbatim repeats."""
        rng, t = self.rng, self.session_topic
        changes: dict = {}
        if rng.random() < 0.5:
            changes["other"] = rng.choice(t.spec.terms)
        if rng.random() < 0.3:
            changes["state"] = rng.choice(STATES)
        if rng.random() < 0.3:
            changes["problem"] = rng.choice(PROBLEMS)
        if rng.random() < 0.2:
            changes["verb"] = rng.choice(VERBS)
        self.topic = replace(t, **changes) if changes else t
        self.words = _words(self.topic)
        self.words.update(n=str(rng.randint(2, 5000)), a=str(rng.randint(20, 400)), b=str(rng.randint(400, 9000)),
                          line=str(rng.randint(1, 900)),
                          version=f"{rng.randint(0, 4)}.{rng.randint(0, 30)}.{rng.randint(0, 12)}")

    def _fill(self, template: str) -> str:
        return template.format(**self.words)

    def _detail(self) -> str:
        zh = self.topic.lang == "zh" or (self.topic.lang == "mixed" and self.rng.random() < 0.5)
        return self._fill(self.rng.choice(ZH_DETAIL if zh else EN_DETAIL))

    def _filler(self) -> str:
        zh = self.topic.lang == "zh" or (self.topic.lang == "mixed" and self.rng.random() < 0.5)
        return self.rng.choice(ZH_FILLER if zh else EN_FILLER)

    def _pools(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        lang = self.topic.lang
        if lang == "zh":
            return ZH_USER, ZH_ASSISTANT
        if lang == "mixed":
            pick = self.rng.random()
            if pick < 0.5:
                return MIXED_USER, MIXED_ASSISTANT
            return (ZH_USER, ZH_ASSISTANT) if pick < 0.8 else (EN_USER, EN_ASSISTANT)
        return EN_USER, EN_ASSISTANT

    def user(self) -> dict:
        self._drift()
        users, _ = self._pools()
        text = self._fill(self.rng.choice(users))
        if self.rng.random() < 0.5:
            text += " " + self._detail()
        if self.rng.random() < 0.3:
            text += " " + self._filler()
        return {"role": "user", "content": text}

    def assistant(self) -> dict:
        self._drift()
        _, assistants = self._pools()
        parts = [self._fill(self.rng.choice(assistants))]
        if self.rng.random() < 0.6:
            parts.append(self._detail())
        for _ in range(self.rng.choice((0, 0, 1, 2, 3))):
            parts.append(self._filler())
        return {"role": "assistant", "content": " ".join(parts)}

    def tool_round(self) -> list[dict]:
        """An assistant message with one or two tool calls, then one result per call."""
        self._drift()
        intro = TOOL_INTRO_ZH if self.topic.lang == "zh" else TOOL_INTRO_EN
        calls, results = [], []
        for _ in range(1 if self.rng.random() < 0.8 else 2):
            self.calls += 1
            call_id = f"call_{self.rng.getrandbits(48):012x}"
            name, args, result = self._tool()
            calls.append({"id": call_id, "type": "function",
                          "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}})
            results.append({"role": "tool", "tool_name": name, "tool_call_id": call_id,
                            "content": json.dumps(result, ensure_ascii=False)})
        call = {"role": "assistant", "content": self._fill(self.rng.choice(intro)), "tool_calls": calls}
        return [call, *results]

    def _tool(self) -> tuple[str, dict, dict]:
        roll = self.rng.random()
        t = self.topic
        if roll < 0.4:
            command = self.rng.choice((t.cmd, t.cmd, f"grep -rn {t.func} .", "git log --oneline -5",
                                       f"git diff --stat {t.file}", "tail -n 40 logs/app.log"))
            return "terminal", {"command": command}, {"output": self._terminal_output(command),
                                                      "exit_code": self.rng.choice((0, 0, 1)), "error": None}
        if roll < 0.7:
            lines = self._code(self.rng.randint(8, 40))
            numbered = "\n".join(f"{i + 1:6d}|{line}" for i, line in enumerate(lines))
            return "read_file", {"path": t.file}, {"content": numbered, "total_lines": len(lines)}
        if roll < 0.9:
            old = self._code(3)
            new = [*old[:2], old[2] + f"  # guard: {t.other.en} may be {t.state.en}"]
            return ("patch", {"path": t.file, "old_string": "\n".join(old), "new_string": "\n".join(new)},
                    {"success": True, "path": t.file, "replacements": 1})
        content = "\n".join(self._code(self.rng.randint(6, 20)))
        return ("write_file", {"path": t.test, "content": content},
                {"success": True, "path": t.test, "bytes_written": len(content.encode())})

    def _terminal_output(self, command: str) -> str:
        t = self.topic
        lines = [f"$ {command}"]
        for i in range(self.rng.randint(2, 14)):
            lines.append(f"2025-{self.rng.randint(1, 12):02d}-{self.rng.randint(1, 28):02d} INFO {t.main.camel} "
                         f"{_past(self.rng.choice(VERBS))} {self.rng.randint(1, 900)} items ({t.func2}) #{i}")
        if self.rng.random() < 0.4:
            lines.append(f"FAILED {t.test}::test_{t.main.snake} - {t.error}")
            lines.append("1 failed, 7 passed in 1.84s")
        else:
            lines.append(f"{self.rng.randint(3, 60)} passed in {self.rng.uniform(0.2, 9):.2f}s")
        return "\n".join(lines)

    def _code(self, n: int) -> list[str]:
        t = self.topic
        arg = t.other.snake
        if t.spec.lang == "go":
            base = [f"func {t.func}(ctx context.Context, {t.other.lower_camel} *{t.other.camel}) error {{",
                    f"\tif {t.other.lower_camel} == nil {{", f'\t\treturn fmt.Errorf("{t.main.en}: {t.problem.en}")',
                    "\t}", f"\treturn {t.func2}(ctx, {t.other.lower_camel})", "}"]
        elif t.spec.lang == "rust":
            base = [f"pub fn {t.func}({arg}: &{t.other.camel}) -> Result<(), Error> {{",
                    f"    if {arg}.is_empty() {{", f'        return Err(Error::new("{t.problem.en}"));', "    }",
                    f"    {t.func2}({arg})", "}"]
        elif t.spec.lang == "ts":
            base = [f"export async function {t.func}({t.other.lower_camel}: {t.other.camel}) {{",
                    f"  if (!{t.other.lower_camel}) {{", f'    throw new Error("{t.main.en}: {t.problem.en}");', "  }",
                    f"  return {t.func2}({t.other.lower_camel});", "}"]
        else:
            base = [f"def {t.func}({arg}, *, retries=3):", f"    if not {arg}:",
                    f'        raise ValueError("{t.main.en}: {t.problem.en}")',
                    f"    result = {t.func2}({arg})",
                    f"    log.info('{t.main.snake} done', extra={{'n': len(result)}})",
                    "    return result", ""]
        out: list[str] = []
        while len(out) < n:
            out.extend(base)
        return out[:n]
