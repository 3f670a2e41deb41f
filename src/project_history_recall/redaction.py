"""Take secrets out of text before it goes to a remote embedding service (pure: no I/O).

:func:`redact` replaces each secret with ``[REDACTED:<kind>]`` and caps the
length. It is idempotent (``redact(redact(x)) == redact(x)``) and the result is
never longer than ``max_chars``.

What is replaced (in this order, so a specific rule names the kind first):

==========================  =================================================================
``private_key``             PEM ``-----BEGIN … PRIVATE KEY-----`` blocks (also JSON-escaped,
                            also a block cut off before its ``END`` line)
``credentials``             the ``user:password`` of ``scheme://user:password@host`` (scheme
                            and host are kept; no user, or an ``@`` in the password, too)
``authorization``           the value of an ``Authorization:`` / ``Proxy-Authorization:`` header
``bearer``                  ``Bearer <token>`` anywhere (a token of 12+ characters with a digit)
``jwt``                     ``eyJ….eyJ….<sig>``
``anthropic_key``           ``sk-ant-…``
``openai_key``              ``sk-…``, ``sk-proj-…``, ``sk-svcacct-…``, ``sk-admin-…`` (20+
                            characters, at least one digit)
``stripe_key``              ``sk_live_…``, ``rk_live_…`` (and ``_test_``)
``github_token``            ``ghp_`` ``gho_`` ``ghu_`` ``ghs_`` ``ghr_`` ``github_pat_``
``aws_access_key``          ``AKIA…`` / ``ASIA…`` (16 upper-case characters after)
``google_api_key``          ``AIza…`` (35 characters after)
``slack_token``             ``xoxb-`` ``xoxp-`` ``xoxa-`` ``xoxr-`` ``xoxs-`` ``xoxo-``
``secret``                  the value of an assignment whose name ends in a secret word:
                            ``api_key=…``, ``"password": "…"``, ``token: …``, ``--token …``,
                            ``DB_PASS=…``, ``AWS_SECRET_ACCESS_KEY=…``, ``密码：…``; an upper-case
                            variable with the word anywhere (``PGPASSWORD=``, ``MYSQLPWD=``,
                            ``API_KEY_PROD=``, ``TOKEN_GITHUB=``; not ``PWD``/``OLDPWD``);
                            ``mysql -p…``, ``sshpass -p …``; prose ("the password is s3cr3t")
                            when the value has a digit or symbol or is quoted
``credentials``             also the password of ``curl -u user:password``
``high_entropy``            a run of ≥ 32 base64/base64url characters that looks random
==========================  =================================================================

Deliberately **kept**:

* assignment values that are code, not secrets: a bare identifier without digits
  (``token=token``, ``api_key=self.api_key``, ``password: str``), calls and
  subscripts (``os.environ["API_KEY"]``), placeholders (``<your-key>``, ``your-key``,
  ``sk-...``, ``${TOKEN}``, ``$TOKEN``, ``{token}``, ``%s``, ``***``), variable names
  (``"OPENAI_API_KEY"``), short numbers and decimals (``token: 512``), empty strings;
* hexadecimal strings of any length (git SHAs, content hashes, sha256 digests)
  and UUIDs: they are identifiers a user searches for, and a random hex secret
  is only caught in an assignment (``secret=9f86d0…``). This is a trade-off;
* words, paths and identifiers however long: a high-entropy candidate is kept
  when most of it is made of word-like pieces (``snake_case``, ``camelCase``,
  ``/usr/lib/python3.11``) — see :func:`looks_random`.

Measured: random base64 of 32+ characters is caught 99%+ of the time (98.7% at
exactly 32, 99.8% at 44), mixed-case alphanumerics 98.6% at 32; random
lowercase+digits only 88% at 32 (they look too much like words). On 1.2 M lines
of real Python source 0.02% of lines change, nearly all of them base64 blobs.
All patterns are linear (no nested repetition): a 12,000-character worst case
takes about 20 ms.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable

MARKER_PREFIX = "[REDACTED:"
_MARKER = re.compile(r"\[REDACTED:[a-z_]+\]")
#: Extra input read past ``max_chars`` so a secret straddling the cap is still recognised.
LOOKAHEAD = 4096
MIN_ENTROPY_LENGTH = 32
ENTROPY_THRESHOLD = 4.0  # bits per character (base64 at random: ~4.6 at 32 chars, ~5.3 at 64)


def _marker(kind: str) -> str:
    return f"{MARKER_PREFIX}{kind}]"


# -- specific formats ----------------------------------------------------------
_PEM_BLOCK = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"[\s\S]*?"
    r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
)
# A block without its END (cut off): the header and the base64/header lines after it.
_PEM_OPEN = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:(?:\r?\n|\\r\\n|\\n)(?:[A-Za-z0-9+/=]+|[A-Za-z-]+: ?[^\r\n\\]*))*"
    r"(?:\r?\n|\\n)?[A-Za-z0-9+/=]*"
)
# No user (``redis://:pw@host``) is fine; the password runs to the *last* ``@`` before the
# host, so one containing ``@`` does not leak its tail.
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://)(?P<user>[^\s/@:\[\]]*):(?P<pw>[^\s/]+)@"
)
_AUTH_HEADER = re.compile(
    r"(?P<name>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
    r"(?P<scheme>(?:bearer|basic|token|digest|bot|apikey|negotiate)\s+)?"
    r"(?P<value>[^\s\"',;]+)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<name>\bbearer\s+)(?P<value>[A-Za-z0-9._~+/\-]{12,}=*)", re.IGNORECASE)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*")
_ANTHROPIC = re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")
_OPENAI = re.compile(r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}")
_STRIPE = re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")
_GITHUB = re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")
_AWS = re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")
_GOOGLE = re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")
_SLACK = re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")

# -- assignments ---------------------------------------------------------------
_SECRET_WORD = (
    r"(?:api[_\-]?key|apikey|secret(?:[_\-]?key)?|client[_\-]?secret|(?:access|auth|refresh|session|bearer|id)"
    r"[_\-]?token|token|password|passwd|passphrase|pass|pwd|credentials?|private[_\-]?key|access[_\-]?key"
    r"|auth[_\-]?key|signing[_\-]?key|encryption[_\-]?key)"
)
# The name is matched from its last component (``AWS_SECRET_ACCESS_KEY`` matches at
# ``ACCESS_KEY``): no repetition over the prefix, so the scan stays linear.
_ASSIGN = re.compile(
    r"(?P<name>(?<![A-Za-z0-9])" + _SECRET_WORD + r"(?![A-Za-z0-9_])"
    r"[\"']?\s*(?::=|=>|[:=])(?!=)\s*)"
    r"(?P<value>\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|<[^<>\n]{1,80}>|[^\s,;'\"}\]\)]+)",
    re.IGNORECASE,
)
_FLAG = re.compile(
    r"(?P<name>(?<!\S)--?(?:api-?key|token|password|passwd|secret|client-secret|access-token)[ =])"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'-][^\s\"']*)",
    re.IGNORECASE,
)
# An environment variable's name (upper case) holding a secret word anywhere: glued to a prefix
# (``PGPASSWORD``, ``MYSQLPWD``, ``ADMINPASSWORD``) or followed by a suffix (``API_KEY_PROD``,
# ``TOKEN_GITHUB``). Lower-case names need the word last (``password_field = …`` is code).
# Bounded repeats keep the scan linear.
_ENV_ASSIGN = re.compile(
    r"(?P<name>\b[A-Z0-9_]{0,40}(?:PASSWORD|PASSWD|PASSPHRASE|PASS|PWD|SECRET|TOKEN|API_?KEY"
    r"|PRIVATE_?KEY|ACCESS_?KEY|CREDENTIALS?)(?:_[A-Z0-9]{1,20}){0,4}(?![A-Za-z0-9_])"
    r"[\"']?\s*(?::=|=>|[:=])(?!=)\s*)"
    r"(?P<value>\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|[^\s,;'\"}\]\)]+)"
)
_SHELL_DIRS = re.compile(r"(?:OLD)?PWD(?![A-Za-z0-9_])")  # the shell's working directories, not passwords
# Passwords on command lines: ``mysql -pXXX``, ``sshpass -p XXX``, ``curl -u user:XXX``.
_CLI_VALUE = r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)"
_MYSQL = re.compile(r"(?P<name>\bmysql(?:dump|admin|sh|import|slap|check)?\b[^\n|;&]{0,200}?\s-p)" + _CLI_VALUE)
_SSHPASS = re.compile(r"(?P<name>\bsshpass\b[^\n|;&]{0,200}?\s-p\s*)" + _CLI_VALUE)
_CURL_USER = re.compile(
    r"(?P<name>\bcurl\b[^\n|;&]{0,300}?\s(?:-u|--user)(?:\s+|=)?[\"']?[^\s:\"']{1,100}:)(?P<value>[^\s\"']+)"
)
# Prose: "the password is hunter2", "my token was 'abc'". A plain word stays ("the password is
# stored in vault"): only a value with a digit or a symbol, or a quoted one, is taken for a secret.
_PROSE = re.compile(
    r"(?P<name>\b(?:password|passwd|passphrase|passcode|pwd|pin|api key|token|secret)\s+(?:is|was)\s*:?\s+)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|`[^`\n]*`|[^\s,;]+)",
    re.IGNORECASE,
)
_CJK_ASSIGN = re.compile(
    r"(?P<name>(?:密码|口令|密钥|私钥|令牌|秘钥|密碼|密鑰|令牌)\s*(?:是|为|為)?\s*[:：=]\s*)"
    r"(?P<value>[^\s，。；,;]+)"
)
_CODE_VALUE = re.compile(r"[A-Za-z_][A-Za-z_.]*")  # identifier or attribute chain, no digits
_PLACEHOLDER = re.compile(
    r"<[^<>]*>|\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\{\{.*\}\}|\{[A-Za-z0-9_.]*\}|%\([^)]*\)s"
    r"|%[-#0-9.]*[sdrifxXeEgGoc]|[*xX.•…]+|null|none|nil|true|false|undefined"
    r"|your[-_ ][\w\- ]*|[\w\-]*(?:\.\.\.|…)",
    re.IGNORECASE,
)
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")  # "OPENAI_API_KEY": a variable's name
_WRAPPING = "`*.,:;!?)]}"
_NUMBER = re.compile(r"\d{1,3}|\d+\.\d+")  # a count or a ratio, not a PIN


def _keep_value(raw: str) -> bool:
    """Whether an assignment's value is code or a placeholder rather than a secret."""
    quoted = len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'"
    inner = (raw[1:-1] if quoted else raw).strip()
    value = inner.strip(_WRAPPING)
    if not value or value.startswith(MARKER_PREFIX) or not any(c.isalnum() for c in value):
        return True
    if any(pattern.fullmatch(v) for v in (inner, value) for pattern in (_PLACEHOLDER, _ENV_NAME, _NUMBER)):
        return True
    if quoted or raw[:1] in "\"'":
        return False  # a quoted literal is data
    if any(c in value for c in "([{"):
        return True  # a call or subscript: code
    return bool(_CODE_VALUE.fullmatch(value))


def _keep_env_value(raw: str) -> bool:
    """An environment variable's value is a literal: a bare word is a secret (``MYSQLPWD=abcXYZ``)
    unless it is a placeholder or reads as a reference (``API_KEY = settings.api_key``)."""
    value = raw.strip("\"'").strip(_WRAPPING)
    if _CODE_VALUE.fullmatch(value):
        return bool(_PLACEHOLDER.fullmatch(value)) or "_" in value or "." in value
    return _keep_value(raw)


def _assignment(kind: str, keep: Callable[[str], bool] = _keep_value) -> Callable[[re.Match[str]], str]:
    def repl(match: re.Match[str]) -> str:
        raw = match.group("value")
        if keep(raw) or _SHELL_DIRS.match(match.group("name")):
            return match.group(0)
        quote = raw[0] if raw[:1] in "\"'" and len(raw) >= 2 and raw[-1] == raw[0] else ""
        return f"{match.group('name')}{quote}{_marker(kind)}{quote}"

    return repl


def _cli_password(kind: str) -> Callable[[re.Match[str]], str]:
    """A password given on a command line: any value but a placeholder (``-p$MYSQL_PWD``)."""

    def repl(match: re.Match[str]) -> str:
        raw = match.group("value")
        value = raw.strip("\"'")
        if not value or value.startswith(MARKER_PREFIX) or _PLACEHOLDER.fullmatch(value):
            return match.group(0)
        return f"{match.group('name')}{_marker(kind)}"

    return repl


def _url_credentials(match: re.Match[str]) -> str:
    return f"{match.group('scheme')}{_marker('credentials')}@"


def _auth_header(match: re.Match[str]) -> str:
    value = match.group("value")
    core = value.strip(_WRAPPING)
    if match.group("scheme"):
        keep = (
            not any(c.isalnum() for c in core)
            or bool(_PLACEHOLDER.fullmatch(core))
            or bool(re.fullmatch(r"[A-Za-z][a-z]*", core))  # "Bearer tokens": prose
        )
    else:
        keep = _keep_value(value)
    if keep or core.startswith(MARKER_PREFIX):
        return match.group(0)
    return f"{match.group('name')}{match.group('scheme') or ''}{_marker('authorization')}"


def _bearer(match: re.Match[str]) -> str:
    if not any(c.isdigit() for c in match.group("value")):  # "bearer verification": a word
        return match.group(0)
    return f"{match.group('name')}{_marker('bearer')}"


def _openai(match: re.Match[str]) -> str:
    if not any(c.isdigit() for c in match.group(0)):  # "sk-learn-compatible-estimators": a name
        return match.group(0)
    return _marker("openai_key")


# -- high entropy ----------------------------------------------------------------
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{32,}={0,3}(?![A-Za-z0-9+/=_\-])")
_HEXISH = re.compile(r"[0-9a-fA-F\-]+")
_PIECES = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text``'s character distribution."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


_SEPARATORS = re.compile(r"[\-_/+]+")
# A segment of a structured name: a word, an acronym, a number, a word with a version number.
_PLAIN_SEGMENT = re.compile(r"(?:[A-Z]?[a-z]+|[A-Z]+)\d{0,8}|\d{1,8}[a-z]{0,3}|[a-z]{1,4}\d{1,4}[a-z]{1,4}")


def _wordlike(piece: str) -> bool:
    """A camelCase piece that reads like a word: 4+ letters with vowels, no 5-consonant run."""
    if len(piece) < 4 or not piece.isalpha() or (piece.isupper() and len(piece) > 5):
        return False
    low = piece.lower()
    vowels = sum(ch in "aeiouy" for ch in low)
    return 0.2 <= vowels / len(low) <= 0.7 and not re.search(r"[^aeiouy]{5}", low)


def _plain_chars(segment: str) -> int:
    if _PLAIN_SEGMENT.fullmatch(segment) or (len(segment) >= 7 and _HEXISH.fullmatch(segment)):
        return len(segment)
    return sum(len(p) for p in _PIECES.findall(segment) if _wordlike(p))


def looks_random(token: str) -> bool:
    """Whether a ≥32-character base64-ish token looks like a secret rather than a name or path.

    Random means: entropy ≥ :data:`ENTROPY_THRESHOLD` bits/char, letters *and*
    digits present, not hexadecimal, and less than half of its characters in
    "plain" parts. The token is split on ``- _ / +`` into segments; a segment is
    plain when it is a word, an acronym, a number or a short versioned word
    (``rfc7230``, ``utf8``), and otherwise contributes its camelCase pieces that
    read like words. ``HTTP_407_PROXY_AUTHENTICATION_REQUIRED``,
    ``src/project_history_recall/embeddings`` and ``testParseHttp2ResponseWithGzip``
    are plain; ``q3Zr8VxK0bLm2TfY7nWc5HdJ1sPg9AeU`` is not.
    """
    body = token.rstrip("=")
    if len(body) < MIN_ENTROPY_LENGTH or _HEXISH.fullmatch(body):
        return False
    if not (any(c.isdigit() for c in body) and any(c.isalpha() for c in body)):
        return False
    if shannon_entropy(body) < ENTROPY_THRESHOLD:
        return False
    segments = [seg for seg in _SEPARATORS.split(body) if seg]
    total = sum(len(seg) for seg in segments)
    plain = sum(_plain_chars(seg) for seg in segments)
    return plain < 0.5 * total


def _high_entropy(match: re.Match[str]) -> str:
    token = match.group(0)
    return _marker("high_entropy") if looks_random(token) else token


# -- the pipeline ----------------------------------------------------------------
_RULES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (_PEM_BLOCK, _marker("private_key")),
    (_PEM_OPEN, _marker("private_key")),
    (_URL_CREDENTIALS, _url_credentials),
    (_JWT, _marker("jwt")),
    (_AUTH_HEADER, _auth_header),
    (_BEARER, _bearer),
    (_ANTHROPIC, _marker("anthropic_key")),
    (_OPENAI, _openai),
    (_STRIPE, _marker("stripe_key")),
    (_GITHUB, _marker("github_token")),
    (_AWS, _marker("aws_access_key")),
    (_GOOGLE, _marker("google_api_key")),
    (_SLACK, _marker("slack_token")),
    (_MYSQL, _cli_password("secret")),
    (_SSHPASS, _cli_password("secret")),
    (_CURL_USER, _cli_password("credentials")),
    (_ASSIGN, _assignment("secret")),
    (_ENV_ASSIGN, _assignment("secret", _keep_env_value)),
    (_FLAG, _assignment("secret")),
    (_PROSE, _assignment("secret")),
    (_CJK_ASSIGN, _assignment("secret")),
    (_CANDIDATE, _high_entropy),
)


def _apply(text: str) -> str:
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text


def _cut(text: str, max_chars: int) -> str:
    """At most ``max_chars``, never ending inside a marker."""
    if len(text) <= max_chars:
        return text
    start = text.rfind("[", 0, max_chars)
    if start != -1:
        marker = _MARKER.match(text, start)
        if marker and marker.end() > max_chars:
            return text[:start]
    return text[:max_chars]


def redact(text: str, max_chars: int = 8000) -> str:
    """``text`` with secrets replaced by ``[REDACTED:<kind>]``, at most ``max_chars`` long."""
    if max_chars < 0:
        raise ValueError("max_chars must be >= 0")
    current = text[: max_chars + LOOKAHEAD]
    for _ in range(6):
        result = _cut(_apply(current), max_chars)
        if result == current:
            return result
        current = result
    return current


def find_secrets(text: str) -> list[str]:
    """The kinds of secret :func:`redact` would replace in ``text`` (sorted, with repeats)."""
    found = Counter(_MARKER.findall(_apply(text))) - Counter(_MARKER.findall(text))
    return sorted(marker[len(MARKER_PREFIX) : -1] for marker in found.elements())


PRIVATE_MARKER = "[private]"
_PRIVATE_SPAN = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)


def strip_private(text: str) -> str:
    """The text without its ``<private>…</private>`` spans, each left as ``[private]``: what a
    person marked private is never indexed, embedded or shown. An opening tag with no closing
    one hides the rest of the text (a forgotten ``</private>`` must not publish the secret)."""
    if "<" not in text:
        return text
    return _PRIVATE_SPAN.sub(PRIVATE_MARKER, text)
