"""Generate ``bench/datasets/dev.json``: the development retrieval evaluation set.

Plain data literals plus a few helpers; deterministic (no clock, no randomness).
Run:  python bench/datasets/make_dev.py   (writes dev.json next to this file)

Layout of the synthetic machine (paths need not exist):

* Ledger        explicit  /home/dev/ledger                 (Python billing service, mostly English)
* ITGC Toolkit  explicit  /home/dev/ledger/tools/itgc      (nested inside Ledger's folder and git repo)
* AdSys         explicit  /home/dev/adsys + /home/dev/adsys-infra  (Go ad server, mostly Chinese)
* tinykv        auto      git_repo_root /home/dev/oss/tinykv       (Rust KV store, English)
* crawler       auto      git_repo_root /home/dev/crawler           (Python scraper, mostly Chinese)
* Home                    cwd /home/dev or no cwd (never asked from, never gold)

Messages are written with a tiny DSL: ``U`` user, ``A`` assistant, ``T`` an
assistant tool call followed by its tool result. A message can carry a label
(``lab=``) so queries can point at it as ``"SESSION_KEY:label"``.
"""

# ruff: noqa: E501  (data file: long message literals)
from __future__ import annotations

import datetime as _dt
import hashlib
import json
from pathlib import Path

UTC = _dt.UTC
OUT = Path(__file__).with_name("dev.json")

LEDGER = "/home/dev/ledger"
ITGC = "/home/dev/ledger/tools/itgc"
ADSYS = "/home/dev/adsys"
ADINFRA = "/home/dev/adsys-infra"
TINYKV = "/home/dev/oss/tinykv"
CRAWLER = "/home/dev/crawler"

PROJECTS = [
    {"name": "Ledger", "folders": [LEDGER], "primary_path": LEDGER},
    {"name": "ITGC Toolkit", "folders": [ITGC], "primary_path": ITGC},
    {"name": "AdSys", "folders": [ADSYS, ADINFRA], "primary_path": ADSYS},
]


# ---------------------------------------------------------------- DSL

def U(text, lab=None):
    return [("user", text, None, lab)]


def A(text, lab=None):
    return [("assistant", text, None, lab)]


def T(name, args, result, lab=None, say="", say_lab=None):
    """An assistant message calling tool ``name`` and the tool's result.

    ``result`` may be a str (used verbatim) or a dict (JSON-encoded like Hermes tools do).
    ``lab`` labels the tool result, ``say_lab`` the calling assistant message.
    """
    if not isinstance(result, str):
        result = json.dumps(result, ensure_ascii=False)
    return [("assistant", say, (name, args), say_lab), ("tool", result, name, lab)]


def run(cmd, output, code=0, lab=None, say=""):
    return T("terminal", {"command": cmd}, {"output": output, "exit_code": code, "error": None},
             lab=lab, say=say)


def read(path, text, lab=None, say=""):
    lines = text.strip("\n").split("\n")
    numbered = "\n".join(f"{i + 1:6d}|{line}" for i, line in enumerate(lines))
    return T("read_file", {"path": path}, {"content": numbered, "total_lines": len(lines)},
             lab=lab, say=say)


def patch(path, old, new, lab=None, say=""):
    return T("patch", {"path": path, "old_string": old, "new_string": new},
             {"success": True, "path": path, "replacements": 1}, lab=lab, say=say)


def write(path, content, lab=None, say=""):
    return T("write_file", {"path": path, "content": content},
             {"success": True, "path": path, "bytes_written": len(content.encode())}, lab=lab, say=say)


def search(pattern, path, matches, lab=None, say=""):
    rows = [{"path": p, "line": n, "content": c} for p, n, c in matches]
    return T("search_files", {"pattern": pattern, "path": path},
             {"matches": rows, "total_count": len(rows)}, lab=lab, say=say)


SESSIONS: list[dict] = []


def session(key, when, title, cwd, root=None, branch="main", archived=False, msgs=(), source="cli"):
    flat = [m for group in msgs for m in group]
    SESSIONS.append({"key": key, "when": when, "title": title, "cwd": cwd, "root": root,
                     "branch": branch if root else None, "archived": archived, "msgs": flat,
                     "source": source})


# ================================================================ Ledger (explicit)

L = dict(cwd=LEDGER, root=LEDGER)
LSRC = dict(cwd=LEDGER + "/src", root=LEDGER)

session("L_webhook_sig", "2026-10-06 10:14", "Stripe webhook signature verification failing", **L,
        branch="fix/webhook-sig", msgs=[
    U("Stripe webhooks in staging all return 400 since this morning. Logs say "
      "`stripe.error.SignatureVerificationError: No signatures found matching the expected signature "
      "for payload`. Can you look?"),
    read("src/ledger/api/webhooks.py", '''
import json
import stripe
from fastapi import APIRouter, Request
from ledger.settings import settings

router = APIRouter()

@router.post("/webhooks/stripe")
async def stripe_webhook(request: Request):
    payload = await request.json()
    sig = request.headers.get("stripe-signature")
    event = stripe.Webhook.construct_event(json.dumps(payload), sig, settings.STRIPE_WEBHOOK_SECRET)
    return await dispatch(event)
'''),
    A("Found it. The handler calls `request.json()` and then re-serialises the dict with `json.dumps(payload)` "
      "before calling `stripe.Webhook.construct_event`. Stripe signs the exact bytes it sent; re-serialising "
      "changes whitespace and key order, so the HMAC can never match. Yesterday's refactor (moving to "
      "`request.json()` for logging) introduced this.", lab="cause"),
    patch("src/ledger/api/webhooks.py",
          "    payload = await request.json()\n    sig = request.headers.get(\"stripe-signature\")\n"
          "    event = stripe.Webhook.construct_event(json.dumps(payload), sig, settings.STRIPE_WEBHOOK_SECRET)",
          "    payload = await request.body()  # raw bytes: Stripe signs exactly these\n"
          "    sig = request.headers.get(\"stripe-signature\")\n"
          "    event = stripe.Webhook.construct_event(payload, sig, settings.STRIPE_WEBHOOK_SECRET)"),
    run("pytest tests/api/test_webhooks.py -q", "....                                                     [100%]\n4 passed in 0.61s"),
    A("Fixed: the webhook now verifies the signature against the raw request body (`payload = await "
      "request.body()`) and only parses JSON after `construct_event` succeeds. tests/api/test_webhooks.py "
      "passes. Also double-check that STRIPE_WEBHOOK_SECRET in staging is the `whsec_...` secret of the "
      "staging endpoint, not the one printed by `stripe listen`.", lab="fix"),
    U("Thanks, deployed and staging is green again."),
])

session("L_webhook_dup", "2026-10-09 15:40", "Idempotent handling of duplicate invoice.paid events", **L,
        branch="feat/processed-events", msgs=[
    U("A customer got two 'payment received' emails for INV-2026-000311. I think Stripe delivered invoice.paid "
      "twice. How do we make the webhook idempotent?"),
    search("invoice.paid", "src/ledger", [
        ("src/ledger/api/webhooks.py", 41, '    if event.type == "invoice.paid":'),
        ("src/ledger/services/payments.py", 88, "def handle_invoice_paid(event):"),
    ]),
    read("src/ledger/services/payments.py", '''
def handle_invoice_paid(event):
    invoice = Invoice.by_stripe_id(event.data.object.id)
    invoice.mark_paid(paid_at=event.created)
    pdf = render_receipt(invoice)          # ~10 s for large invoices
    mailer.send_receipt(invoice.customer.email, pdf)
    db.session.commit()
'''),
    A("Stripe delivers webhooks at least once. We take ~12 s to answer because the receipt PDF is rendered "
      "inline, Stripe times out and retries, and the retry sends a second email. Plan: record every "
      "`event.id` in a new `processed_events` table (primary key on event_id), insert with "
      "`ON CONFLICT DO NOTHING` and skip the handler when no row was inserted. Also move the PDF and email "
      "into a Celery task so we return 200 quickly.", lab="plan"),
    write("migrations/versions/7c41d2_processed_events.py", '''"""processed_events

Revision ID: 7c41d2
Revises: 3f2a1c
"""
from alembic import op
import sqlalchemy as sa

revision = "7c41d2"
down_revision = "3f2a1c"

def upgrade():
    op.create_table(
        "processed_events",
        sa.Column("event_id", sa.String(), primary_key=True),
        sa.Column("received_at", sa.DateTime(timezone=True), server_default=sa.func.now()),
    )

def downgrade():
    op.drop_table("processed_events")
'''),
    patch("src/ledger/services/payments.py",
          "def handle_invoice_paid(event):\n    invoice = Invoice.by_stripe_id(event.data.object.id)",
          "def handle_invoice_paid(event):\n"
          "    res = db.session.execute(insert(processed_events).values(event_id=event.id)"
          ".on_conflict_do_nothing())\n"
          "    if res.rowcount == 0:\n        return  # already handled\n"
          "    invoice = Invoice.by_stripe_id(event.data.object.id)"),
    A("Done. `handle_invoice_paid` now inserts the event id with `on_conflict_do_nothing()` and returns early "
      "when `rowcount == 0`; the receipt is sent by `send_receipt.delay(invoice_id)` after commit. Replaying "
      "the same event with `stripe events resend evt_1Q7...` now produces a single email.", lab="fix"),
])

session("L_invoice_race", "2026-10-14 11:05", "Duplicate invoice numbers under concurrent checkout", **LSRC,
        branch="fix/invoice-numbering", msgs=[
    U("Sentry from the load test: `psycopg.errors.UniqueViolation: duplicate key value violates unique "
      "constraint \"invoices_number_key\"` DETAIL: Key (number)=(INV-2026-000457) already exists."),
    read("src/ledger/domain/numbering.py", '''
def next_invoice_number(session, year: int) -> str:
    last = session.execute(
        select(func.max(Invoice.number)).where(Invoice.year == year)
    ).scalar()
    seq = int(last.rsplit("-", 1)[1]) + 1 if last else 1
    return f"INV-{year}-{seq:06d}"
'''),
    A("Classic read-then-write race: two transactions read the same MAX(number) and both compute 000457; the "
      "second insert hits the unique constraint. Options: (1) a Postgres SEQUENCE per year - fast, but "
      "sequences leave gaps on rollback; (2) one row per year in an `invoice_counters` table, locked with "
      "`SELECT ... FOR UPDATE` and incremented in the same transaction. If numbers must be gapless, (2).",
      lab="cause"),
    U("Gapless is a legal requirement for our German entity. Go with the counter table."),
    patch("src/ledger/domain/numbering.py",
          "    last = session.execute(\n        select(func.max(Invoice.number)).where(Invoice.year == year)\n"
          "    ).scalar()\n    seq = int(last.rsplit(\"-\", 1)[1]) + 1 if last else 1",
          "    counter = session.execute(\n"
          "        select(InvoiceCounter).where(InvoiceCounter.year == year).with_for_update()\n"
          "    ).scalar_one()\n    counter.value += 1\n    seq = counter.value"),
    run("pytest tests/domain/test_numbering.py -q -k concurrent",
        ".                                                        [100%]\n1 passed in 3.02s"),
    A("Switched `next_invoice_number` to lock the per-year row in `invoice_counters` with `with_for_update()` "
      "and bump it inside the same transaction as the invoice insert. The new `test_concurrent_numbering` "
      "runs 20 threads and asserts 20 distinct consecutive numbers. Cost: invoice creation is serialised per "
      "year, about 2 ms extra under load.", lab="fix"),
])

session("L_numbering_scratch", "2026-10-13 18:00", "scratch: UUID invoice numbers idea", **L, archived=True, msgs=[
    U("Random thought: what if invoice numbers were UUIDv7 so duplicate invoice numbers can't happen at all?"),
    A("UUIDv7 would remove collisions and still sort by time, but German GoBD rules expect sequential, gapless "
      "invoice numbers, and customers read them on the phone. I wouldn't switch."),
    U("ok, forget it then"),
    A("Noted, dropping the UUID idea."),
])

session("L_lint", "2026-10-12 12:00", "Tighten ruff and mypy config", **L, msgs=[
    U("Can you make mypy strict only for src/ledger/domain and stop ruff complaining about line length in "
      "migrations?"),
    read("pyproject.toml", '''
[tool.ruff]
line-length = 100
target-version = "py312"

[tool.mypy]
python_version = "3.12"
ignore_missing_imports = true
'''),
    patch("pyproject.toml", "[tool.mypy]\npython_version = \"3.12\"\nignore_missing_imports = true",
          "[tool.ruff.lint.per-file-ignores]\n\"migrations/*\" = [\"E501\"]\n\n[tool.mypy]\n"
          "python_version = \"3.12\"\nignore_missing_imports = true\n\n[[tool.mypy.overrides]]\n"
          "module = \"ledger.domain.*\"\nstrict = true"),
    run("mypy src/ledger/domain",
        "src/ledger/domain/tax.py:14: error: Function is missing a return type annotation  [no-untyped-def]\n"
        "src/ledger/domain/tax.py:31: error: Function is missing a type annotation  [no-untyped-def]\n"
        "src/ledger/domain/numbering.py:9: error: Returning Any from function declared to return \"str\"  "
        "[no-any-return]\nFound 3 errors in 2 files (checked 9 source files)", code=1),
    A("Three errors in the domain package; adding the annotations and a `str()` around the scalar."),
    run("mypy src/ledger/domain && ruff check .", "Success: no issues found in 9 source files\nAll checks passed!"),
    A("mypy strict now applies to `ledger.domain.*` through a `[[tool.mypy.overrides]]` block, and "
      "`migrations/*` ignores E501 via `[tool.ruff.lint.per-file-ignores]`. Fixed the 3 missing annotations "
      "in tax.py and numbering.py; both tools are clean.", lab="fix"),
])

session("L_vat_round", "2026-10-17 09:30", "VAT rounding off by one cent", **LSRC, msgs=[
    U("Finance flagged INV-2026-000388 for a customer in NL: the total says €121.00 but the lines add up to "
      "€120.99 including VAT."),
    read("src/ledger/domain/tax.py", '''
def line_vat(net: float, rate: float) -> float:
    return round(net * rate, 2)

def invoice_total(lines) -> float:
    return round(sum(l.net * (1 + l.rate) for l in lines), 2)
'''),
    A("Two problems: the VAT is computed with binary floats and Python's `round()`, which rounds half to even "
      "(0.125 -> 0.12), and the total is rounded on its own instead of summing the rounded lines. Finance's "
      "rule is: round each line half-up to the cent, then add up.", lab="cause"),
    patch("src/ledger/domain/tax.py", "def line_vat(net: float, rate: float) -> float:\n    return round(net * rate, 2)",
          "CENT = Decimal(\"0.01\")\n\ndef line_vat(net: Decimal, rate: Decimal) -> Decimal:\n"
          "    return (net * rate).quantize(CENT, rounding=ROUND_HALF_UP)"),
    run("pytest tests/domain/test_tax.py -q", ".......                                                  [100%]\n7 passed in 0.12s"),
    A("All money math in tax.py now uses `Decimal` with `quantize(CENT, rounding=ROUND_HALF_UP)` per line, and "
      "the invoice total is the sum of the rounded lines. Added `test_vat_rounding_half_up` with the NL case "
      "(3 x €33.3333 at 21%).", lab="fix"),
])

session("L_refund", "2026-10-19 15:00", "Partial refunds endpoint design", **L, branch="feat/refunds", msgs=[
    U("We need POST /invoices/{id}/refunds with partial refunds. What should the state machine look like?"),
    A("Proposal: invoice status goes `paid` -> `partially_refunded` while the sum of refunds is below the "
      "total, and -> `refunded` when it equals it. A `refunds` row has id, invoice_id, amount, reason (enum: "
      "duplicate, requested_by_customer, fraudulent) and stripe_refund_id. Reject amounts above the remaining "
      "refundable balance with 422 `refund_exceeds_balance`. Refunds are created with Stripe first and stored "
      "only after Stripe confirms.", lab="design"),
    U("Sounds good, implement it. Also add the reason column."),
    write("src/ledger/api/refunds.py", '''@router.post("/invoices/{invoice_id}/refunds", status_code=201)
async def create_refund(invoice_id: int, body: RefundIn, db: Session = Depends(get_db)):
    invoice = db.get(Invoice, invoice_id) or raise_404()
    remaining = invoice.total - invoice.refunded_amount
    if body.amount > remaining:
        raise HTTPException(422, detail={"code": "refund_exceeds_balance", "remaining": str(remaining)})
    sr = stripe.Refund.create(payment_intent=invoice.payment_intent_id, amount=to_minor_units(body.amount))
    refund = Refund(invoice=invoice, amount=body.amount, reason=body.reason, stripe_refund_id=sr.id)
    invoice.status = "refunded" if body.amount == remaining else "partially_refunded"
    db.add(refund)
    db.commit()
    return refund
'''),
    write("migrations/versions/9b7e44_refund_reason.py", '''revision = "9b7e44"
down_revision = "3f2a1c"

def upgrade():
    op.add_column("refunds", sa.Column("reason", sa.String(32), nullable=False, server_default="requested_by_customer"))

def downgrade():
    op.drop_column("refunds", "reason")
'''),
    run("pytest tests/api/test_refunds.py -q", "......                                                   [100%]\n6 passed in 0.88s"),
    A("Implemented `POST /invoices/{id}/refunds` in src/ledger/api/refunds.py: 422 `refund_exceeds_balance` when "
      "the amount is above what's left, status transitions paid -> partially_refunded -> refunded, and "
      "migration 9b7e44 adds `refunds.reason`. Six tests cover full, partial, over-refund and repeated "
      "partial refunds.", lab="fix"),
])

session("L_alembic_heads", "2026-10-21 16:20", "Alembic multiple heads after merging branches", **L, msgs=[
    U("`alembic upgrade head` fails on main:\nFAILED: Multiple head revisions are present for given argument "
      "'head'; please specify a specific target revision, '<branchname>@head' to narrow to a branch head, or "
      "'heads' for all heads"),
    run("alembic heads", "7c41d2 (head)\n9b7e44 (head)"),
    A("Two branches each added a migration on top of 3f2a1c: 7c41d2 (processed_events) and 9b7e44 (refund "
      "reason column). They touch different tables, so a merge revision is enough, no reordering needed."),
    run("alembic merge -m 'merge processed_events and refund_reason' 7c41d2 9b7e44",
        "  Generating /home/dev/ledger/migrations/versions/a1f0c3_merge_processed_events_and_refund_reason.py ...  done"),
    run("alembic upgrade head",
        "INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.\n"
        "INFO  [alembic.runtime.migration] Running upgrade 7c41d2, 9b7e44 -> a1f0c3, merge processed_events and refund_reason"),
    A("Created merge revision a1f0c3 with `alembic merge` and the upgrade runs. To catch this before it lands "
      "on main I added a CI step that runs `alembic heads` and fails when it prints more than one line.",
      lab="fix"),
])

session("L_flaky_login", "2026-10-23 13:10", "CI flake in test_login_refresh_token", **L, msgs=[
    U("test_login_refresh_token fails maybe 1 run in 5 on CI, never locally:\n"
      "E   httpx.ReadTimeout: timed out\ntests/auth/test_login.py:58: ReadTimeout"),
    read("tests/auth/test_login.py", '''
def test_login_refresh_token(client, user):
    r = client.post("/auth/token", data={"username": user.email, "password": "pw"})
    refresh = r.json()["refresh_token"]
    r2 = client.post("/auth/refresh", json={"refresh_token": refresh})
    assert r2.status_code == 200
'''),
    read("src/ledger/auth/jwks.py", '''
JWKS_URL = "https://auth.staging.example.com/.well-known/jwks.json"

def get_jwks():
    return httpx.get(JWKS_URL, timeout=5).json()
'''),
    A("The refresh path validates the token against the identity provider's JWKS, and `get_jwks()` fetches it "
      "from the real staging IdP on every call with a 5 s timeout. From the shared CI runners that request is "
      "sometimes slower than 5 s, hence `httpx.ReadTimeout`; from your laptop it's fast.", lab="cause"),
    patch("src/ledger/auth/jwks.py", "    return httpx.get(JWKS_URL, timeout=5).json()",
          "    return _cached_jwks(httpx.Timeout(30.0, connect=5.0))"),
    write("tests/auth/conftest.py", '''import pytest
import respx

@pytest.fixture(autouse=True)
def mock_jwks(jwks_keyset):
    with respx.mock(assert_all_called=False) as router:
        router.get("https://auth.staging.example.com/.well-known/jwks.json").respond(json=jwks_keyset)
        yield router
'''),
    run("pytest tests/auth -q --count=30", "150 passed in 41.20s"),
    A("Two changes: the JWKS fetch timeout went from 5 s to 30 s (connect stays 5 s) and the key set is cached "
      "for 10 minutes, and in tests the JWKS endpoint is mocked with respx in tests/auth/conftest.py so CI "
      "never talks to staging. 30 repeated runs of the auth tests, no failures.", lab="fix"),
])

session("L_fx_cache", "2026-10-27 10:00", "Cache ECB exchange rates in Redis", **L, msgs=[
    U("Every invoice render calls the ECB API for EUR->USD and we got rate limited yesterday (HTTP 429). Can "
      "we cache the rates?"),
    A("Reference rates only change once per business day (around 16:00 CET), so caching per date is safe. I'll "
      "cache in Redis, which we already run for Celery."),
    read("src/ledger/fx/client.py", '''
def get_rate(base: str, quote: str, day: date) -> Decimal:
    r = httpx.get(f"{ECB_URL}/D.{quote}.{base}.SP00.A", params={"startPeriod": day.isoformat()})
    return parse_rate(r)
'''),
    patch("src/ledger/fx/client.py", "def get_rate(base: str, quote: str, day: date) -> Decimal:\n",
          "def get_rate(base: str, quote: str, day: date) -> Decimal:\n"
          "    key = f\"fx:{base}:{quote}:{day.isoformat()}\"\n"
          "    if (hit := redis.get(key)) is not None:\n        return Decimal(hit.decode())\n"),
    run("pytest tests/fx -q", ".....                                                    [100%]\n5 passed in 0.30s"),
    A("FX rates are now cached in Redis under `fx:{base}:{quote}:{date}` with a 36 h TTL; on a miss we call "
      "ECB, and on weekends and holidays (ECB answers 404) we fall back to the previous business day. ECB "
      "calls went from ~4k a day to 2.", lab="fix"),
])

session("L_pdf_fonts", "2026-10-29 14:45", "WeasyPrint PDF shows boxes for CJK names", **L, msgs=[
    U("A Japanese customer's invoice PDF shows empty squares instead of the company name 株式会社サンプル. "
      "Only in production, fine on my Mac."),
    run("docker run --rm registry.internal/ledger:prod fc-list | grep -i cjk", "", code=1),
    A("The production image is based on python:3.12-slim, which ships no CJK fonts, so WeasyPrint falls back "
      "to a font without those glyphs and draws tofu boxes. Your Mac has Hiragino, which is why it looks fine "
      "locally.", lab="cause"),
    patch("Dockerfile", "RUN pip install --no-cache-dir -r requirements.txt",
          "RUN apt-get update && apt-get install -y --no-install-recommends fonts-noto-cjk \\\n"
          "    && rm -rf /var/lib/apt/lists/*\nRUN pip install --no-cache-dir -r requirements.txt"),
    patch("templates/invoice.css", "font-family: \"Inter\", sans-serif;",
          "font-family: \"Inter\", \"Noto Sans CJK JP\", sans-serif;"),
    A("Installed fonts-noto-cjk in the Dockerfile and added \"Noto Sans CJK JP\" to the font stack in "
      "templates/invoice.css. The image grows by 58 MB. Re-rendered INV-2026-000402 in the new image and the "
      "company name prints correctly.", lab="fix"),
])

session("L_celery_oom", "2026-11-03 08:50", "Celery worker OOM during monthly statements", **L, msgs=[
    U("The statements worker got OOMKilled at 02:00 again while generating the monthly statements. That's about "
      "40k customers."),
    run("kubectl logs deploy/ledger-worker-statements --previous | tail -3",
        "[2026-11-01 02:14:31,877: INFO/ForkPoolWorker-3] statement 31877/40112\n"
        "[2026-11-01 02:14:33,120: ERROR/MainProcess] Process 'ForkPoolWorker-3' pid:57 exited with "
        "'signal 9 (SIGKILL)'"),
    read("src/ledger/tasks/statements.py", '''
@app.task
def generate_monthly_statements(year, month):
    customers = session.query(Customer).options(selectinload(Customer.invoices)).all()
    pdfs = []
    for c in customers:
        pdfs.append(render_statement(c, year, month))
    upload_all(pdfs)
'''),
    A("`generate_monthly_statements` loads all 40k customers with their invoices in one task, and every "
      "rendered PDF stays in the `pdfs` list until the end, so RSS climbs to ~3.5 GB before the kernel kills "
      "it.", lab="cause"),
    patch("src/ledger/tasks/statements.py",
          "    customers = session.query(Customer).options(selectinload(Customer.invoices)).all()",
          "    ids = session.scalars(select(Customer.id)).all()\n"
          "    for chunk in chunked(ids, 500):\n        generate_statement_batch.delay(chunk, year, month)"),
    patch("src/ledger/celeryconfig.py", "worker_prefetch_multiplier = 1",
          "worker_prefetch_multiplier = 1\nworker_max_tasks_per_child = 50\n"
          "worker_max_memory_per_child = 400_000  # KiB"),
    A("Statements now fan out into batches of 500 customer ids (`generate_statement_batch`), each batch "
      "streams with `yield_per(500)` and uploads every PDF to S3 right away instead of keeping a list. "
      "celeryconfig.py sets `worker_max_tasks_per_child=50` and `worker_max_memory_per_child=400000` so a "
      "leaking child is recycled. Peak RSS in the dry run: 380 MB.", lab="fix"),
])

session("L_recon_zh", "2026-11-05 19:20", "对账发现重复扣款", **L, msgs=[
    U("财务那边对账发现 11 月 4 号有 6 个客户被重复扣款了，Stripe 后台能看到两笔金额一样的 charge。帮我查一下是怎么回事。"),
    run("grep -rn 'def charge_customer' -B1 src/ledger/tasks/",
        "src/ledger/tasks/billing.py-22-@app.task(bind=True, autoretry_for=(httpx.HTTPError,), retry_backoff=True, "
        "max_retries=5)\nsrc/ledger/tasks/billing.py:23:def charge_customer(self, invoice_id):"),
    read("src/ledger/tasks/billing.py", '''
@app.task(bind=True, autoretry_for=(httpx.HTTPError,), retry_backoff=True, max_retries=5)
def charge_customer(self, invoice_id):
    invoice = Invoice.get(invoice_id)
    stripe.PaymentIntent.create(
        amount=to_minor_units(invoice.total, invoice.currency),
        currency=invoice.currency,
        customer=invoice.customer.stripe_id,
        confirm=True,
    )
'''),
    A("原因找到了：`charge_customer` 配了 `autoretry_for=(httpx.HTTPError,)`。11 月 4 号晚上 Stripe 接口响应很慢，"
      "请求其实已经扣款成功，但我们这边读超时，Celery 自动重试又调用了一次 `PaymentIntent.create`。因为没有传幂等键，"
      "Stripe 把第二次当成一笔新的支付。", lab="cause"),
    U("那怎么改？已经扣重的要退吗？"),
    patch("src/ledger/tasks/billing.py", "        confirm=True,\n    )",
          "        confirm=True,\n        idempotency_key=f\"charge-{invoice.id}-{invoice.attempt}\",\n    )"),
    A("已修改：`PaymentIntent.create` 现在带上 `idempotency_key=f\"charge-{invoice.id}-{invoice.attempt}\"`，"
      "Celery 重试时 Stripe 会返回同一个 PaymentIntent，不会再重复扣款。已经扣重的 6 笔，我写了 "
      "scripts/refund_duplicates.py 把它们列出来（默认 --dry-run），财务确认后再加 --execute 退款。", lab="fix"),
    U("好，我把清单发给财务。"),
])

session("L_deploy_zh", "2026-11-10 17:05", "部署到 staging 报 exec format error", **L, msgs=[
    U("我在 M2 的 Mac 上 build 的镜像推到 staging，容器起不来：`exec /usr/local/bin/uvicorn: exec format error`"),
    A("这是 CPU 架构不匹配：你本地 build 出来的是 arm64 镜像，staging 的节点是 x86_64（amd64），二进制没法执行。先确认一下镜像架构。",
      lab="cause"),
    run("docker image inspect registry.internal/ledger:staging --format '{{.Architecture}}'", "arm64"),
    run("docker buildx build --platform linux/amd64 -t registry.internal/ledger:staging --push .",
        "[+] Building 212.4s (14/14) FINISHED\n => exporting to image\n => => pushing layers  done\n"
        " => => pushing manifest for registry.internal/ledger:staging  done"),
    A("用 `docker buildx build --platform linux/amd64` 重新构建并推送后，staging 已经正常启动。以后建议只用 CI 出镜像；"
      "我也在 Makefile 的 `make push-staging` 里加了 `--platform linux/amd64`，避免本地再推错架构。", lab="fix"),
    U("好的。部署之后还要手动跑 alembic 吗？"),
    A("要的。现在 entrypoint 里不会自动做迁移，部署后执行 `kubectl exec deploy/ledger-api -- alembic upgrade head`；"
      "等我们把迁移放进 Helm 的 pre-upgrade hook 之后就不用手动了。", lab="migrate"),
])

session("L_jpy", "2026-11-12 10:30", "Zero-decimal currencies charged 100x", **LSRC, msgs=[
    U("We charged a Japanese customer ¥1,200,000 instead of ¥12,000!! What happened?"),
    read("src/ledger/payments/amounts.py", '''
def to_minor_units(amount: Decimal) -> int:
    return int(amount * 100)
'''),
    A("`to_minor_units` always multiplies by 100. Stripe treats JPY (and KRW, VND, CLP, ...) as zero-decimal "
      "currencies: the amount is already in the smallest unit, so ¥12,000 has to be sent as 12000, not "
      "1200000.", lab="cause"),
    patch("src/ledger/payments/amounts.py", "def to_minor_units(amount: Decimal) -> int:\n    return int(amount * 100)",
          "ZERO_DECIMAL = {\"BIF\", \"CLP\", \"DJF\", \"GNF\", \"JPY\", \"KMF\", \"KRW\", \"MGA\", \"PYG\", "
          "\"RWF\", \"UGX\", \"VND\", \"VUV\", \"XAF\", \"XOF\", \"XPF\"}\n\n"
          "def to_minor_units(amount: Decimal, currency: str) -> int:\n"
          "    exp = 0 if currency.upper() in ZERO_DECIMAL else 2\n"
          "    return int(amount.scaleb(exp))"),
    run("pytest tests/payments/test_amounts.py -q", ".........                                                [100%]\n9 passed in 0.09s"),
    A("`to_minor_units(amount, currency)` now uses exponent 0 for Stripe's zero-decimal currencies (the "
      "`ZERO_DECIMAL` set in amounts.py) and 2 otherwise; three-decimal currencies like BHD/KWD still need "
      "handling before we sell there. All callers pass the invoice currency now. You'll have to refund "
      "¥1,188,000 on that payment from the Stripe dashboard.", lab="fix"),
])

session("L_tz", "2026-11-18 09:15", "Statement period cut at UTC midnight", **LSRC, msgs=[
    U("Customers in America/Los_Angeles see invoices from the evening of October 31 in their November "
      "statement."),
    read("src/ledger/tasks/statements.py", '''
def statement_period(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=timezone.utc)
    end = start + relativedelta(months=1)
    return start, end
'''),
    A("Statement periods are computed in UTC. An invoice issued at 2026-10-31 18:00 PDT is 2026-11-01 01:00 "
      "UTC, so it lands in November.", lab="cause"),
    patch("src/ledger/tasks/statements.py", "def statement_period(year: int, month: int) -> tuple[datetime, datetime]:\n"
          "    start = datetime(year, month, 1, tzinfo=timezone.utc)",
          "def statement_period(year: int, month: int, tz: str) -> tuple[datetime, datetime]:\n"
          "    start = datetime(year, month, 1, tzinfo=ZoneInfo(tz))"),
    run("pytest tests/tasks/test_statements.py -q", "............                                             [100%]\n12 passed in 1.40s"),
    A("Period boundaries are now computed in the customer's `timezone` (falling back to the billing country's "
      "default, then UTC) and converted to UTC for the query. Added a test with a Los Angeles invoice on Oct 31 "
      "at 18:00 local time.", lab="fix"),
])

session("L_refund_mixed", "2026-11-24 11:40", "重跑 migrate 后 test_refund_partial 挂了", **L, branch="feat/refunds-v2", msgs=[
    U("重跑 `alembic downgrade base && alembic upgrade head` 之后，test_refund_partial 挂了：\n"
      "sqlalchemy.exc.IntegrityError: insert or update on table \"invoices\" violates foreign key constraint "
      "\"invoices_plan_id_fkey\""),
    run("pytest tests/api/test_refunds.py -q -x",
        "F\n_____ test_refund_partial _____\nE   sqlalchemy.exc.IntegrityError: (psycopg.errors.ForeignKeyViolation) "
        "insert or update on table \"invoices\" violates foreign key constraint \"invoices_plan_id_fkey\"\n"
        "E   DETAIL:  Key (plan_id)=(1) is not present in table \"plans\".\n1 failed in 0.71s", code=1),
    read("tests/conftest.py", '''
@pytest.fixture(scope="session")
def seed_plans(db):
    if os.environ.get("LEDGER_SEED") != "1":
        return
    ...
'''),
    A("原因：测试里的 plan 以前是 migration 3f2a1c 里的 data migration 插进去的；10 月合并 a1f0c3 的时候那段 data "
      "migration 被拆到了 scripts/seed.py，所以你 downgrade 到 base 再 upgrade 之后 plans 表是空的，插 invoice 时外键找不到 "
      "plan_id=1。`seed_plans` 又只在 LEDGER_SEED=1 时才插数据。", lab="cause"),
    patch("tests/conftest.py", "@pytest.fixture(scope=\"session\")\ndef seed_plans(db):\n"
          "    if os.environ.get(\"LEDGER_SEED\") != \"1\":\n        return",
          "@pytest.fixture(scope=\"session\", autouse=True)\ndef seed_plans(db):\n"
          "    db.execute(insert(Plan).values(PLANS).on_conflict_do_nothing())"),
    run("pytest tests/api/test_refunds.py -q", "......                                                   [100%]\n6 passed in 0.84s"),
    A("把 `seed_plans` 改成 session 级的 autouse fixture，直接插入 basic / pro 两个 plan，不再依赖 data migration 和环境变量。"
      "重跑 migrate 之后 `test_refund_partial` 也过了。", lab="fix"),
])

session("L_pg_pool", "2026-11-26 14:00", None, **L, msgs=[
    U("After scaling ledger-api to 8 replicas we get `asyncpg.exceptions.TooManyConnectionsError: sorry, too "
      "many clients already` from Postgres."),
    read("src/ledger/db.py", '''
engine = create_async_engine(settings.DATABASE_URL, pool_size=20, max_overflow=10)
'''),
    A("Each process can open pool_size=20 + max_overflow=10 = 30 connections; 8 replicas x 2 uvicorn workers x 30 "
      "= 480, and the RDS instance (db.r6g.large) allows about 400 `max_connections`.", lab="cause"),
    patch("src/ledger/db.py", "pool_size=20, max_overflow=10)", "pool_size=5, max_overflow=5, pool_timeout=10)"),
    A("Lowered the per-process pool to pool_size=5, max_overflow=5 (160 connections max across the fleet) with "
      "a 10 s pool_timeout, and opened INFRA-812 to put PgBouncer in transaction mode in front of RDS. The "
      "errors stopped after the rollout.", lab="fix"),
    U("thanks"),
])

session("L_ask1", "2026-11-30 09:00", "Ledger: catching up", cwd=LEDGER + "/src", root=LEDGER, msgs=[])
session("L_ask2", "2026-11-30 15:20", None, **L, branch="feat/refunds-v2", msgs=[
    U("what's left to do on the refunds work?"),
    A("Let me check the project history for the refund sessions."),
])


# ================================================================ ITGC Toolkit (explicit, nested in Ledger)

IT = dict(cwd=ITGC, root=LEDGER)

session("I_okta", "2026-10-08 10:20", "gen-itgc 导出 Okta 用户访问复核", **IT, msgs=[
    U("审计要 Q3 的用户访问复核（UAR）证据，`gen-itgc uar --quarter 2026Q3` 只导出了 200 个用户，Okta 里实际有 1340 个。"),
    read("itgc/sources/okta.py", '''
def list_users(client: httpx.Client) -> list[dict]:
    resp = client.get("/api/v1/users", params={"limit": 200})
    resp.raise_for_status()
    return resp.json()
'''),
    A("Okta 的 `/api/v1/users` 是分页接口，每页最多 200 条，下一页地址在响应头 `Link: <...>; rel=\"next\"` 里，我们只取了第一页。",
      lab="cause"),
    patch("itgc/sources/okta.py", "    resp = client.get(\"/api/v1/users\", params={\"limit\": 200})\n"
          "    resp.raise_for_status()\n    return resp.json()",
          "    users, url, params = [], \"/api/v1/users\", {\"limit\": 200}\n    while url:\n"
          "        resp = client.get(url, params=params)\n        resp.raise_for_status()\n"
          "        users += resp.json()\n        url, params = resp.links.get(\"next\", {}).get(\"url\"), None\n"
          "    return users"),
    run("gen-itgc uar --quarter 2026Q3 --out out/uar_2026Q3.xlsx",
        "Traceback (most recent call last):\n  ...\nhttpx.HTTPStatusError: Client error '429 Too Many Requests' for url "
        "'https://corp.okta.com/api/v1/users?after=00u1x9k2&limit=200'", code=1),
    A("翻页之后触发了 Okta 的限流（429）。Okta 在响应头里给了 `X-Rate-Limit-Remaining` 和 `X-Rate-Limit-Reset`，按它等就行。"),
    patch("itgc/sources/okta.py", "        resp = client.get(url, params=params)\n",
          "        resp = _get_with_backoff(client, url, params)  # waits until X-Rate-Limit-Reset on 429\n"),
    run("gen-itgc uar --quarter 2026Q3 --out out/uar_2026Q3.xlsx", "导出 1340 个用户 -> out/uar_2026Q3.xlsx（重试 2 次）"),
    A("已修复：okta.py 现在沿着 `Link rel=next` 翻页；遇到 429 时读 `X-Rate-Limit-Reset`，睡到重置时间再重试（最多 5 次）。"
      "Q3 的 UAR 导出了全部 1340 个用户。", lab="fix"),
])

session("I_gh_prs", "2026-10-15 11:30", "Change management evidence from merged PRs", **IT, msgs=[
    U("For the change-management control we need every PR merged to main in the quarter, with who approved it. "
      "Can gen-itgc pull that from GitHub?"),
    A("Yes, with the GraphQL search API: `repo:acme/ledger is:pr is:merged base:main "
      "merged:2026-07-01..2026-09-30`, and for each PR `reviewDecision`, the APPROVED reviews and `mergedBy`."),
    write("itgc/sources/github.py", '''QUERY = """
query($q: String!, $after: String) {
  search(query: $q, type: ISSUE, first: 100, after: $after) {
    pageInfo { hasNextPage endCursor }
    nodes { ... on PullRequest {
      number title mergedAt mergedBy { login }
      reviewDecision
      reviews(states: APPROVED, first: 10) { nodes { author { login } submittedAt } }
    } }
  }
}
"""

def merged_prs(client, repo: str, start: date, end: date):
    q = f"repo:{repo} is:pr is:merged base:main merged:{start}..{end}"
    yield from paginate(client, QUERY, {"q": q})
'''),
    run("gen-itgc change --quarter 2026Q3 --dry-run", "214 PRs merged to main, 3 without approval: #1872, #1901, #1933"),
    A("Added itgc/sources/github.py: a GraphQL search over PRs merged into main during the quarter, pulling "
      "`reviewDecision`, the approving reviewers and `mergedBy`. PRs whose `reviewDecision` isn't APPROVED are "
      "flagged as exceptions. Q3 has 3 (#1872, #1901, #1933), all hotfixes merged by admins bypassing branch "
      "protection.", lab="fix"),
    U("Auditors will ask about those three. Can we attach the justification?"),
    A("Added `exceptions.yaml`, where you map a PR number to a justification and the incident ticket; gen-itgc "
      "writes them to an 'Exceptions' sheet and fails with `UnjustifiedException: #1933` if a flagged PR has no "
      "entry.", lab="exc"),
])

session("I_zipapp", "2026-10-20 14:00", "gen-itgc 打包成单文件给审计用", **IT, msgs=[
    U("审计同事的电脑装不了 pip 包，能不能把 gen-itgc 打成一个文件？他们有 Python 3.11。"),
    A("可以用 shiv 打成 .pyz（zipapp），依赖都打进去，双击或者 `python gen-itgc.pyz` 就能跑。"),
    run("shiv -c gen-itgc -o dist/gen-itgc.pyz --python '/usr/bin/env python3' .",
        "Successfully built gen-itgc\nwrote dist/gen-itgc.pyz (14.2 MB)"),
    U("在审计的 Windows 笔记本上跑报错：`ModuleNotFoundError: No module named 'pydantic_core._pydantic_core'`"),
    A("pydantic_core 是编译好的二进制扩展，shiv 打进去的是我这台 Linux x86_64 的 .so，Windows 加载不了。需要在 Windows 上"
      "（或者用 `pip download --platform win_amd64 --only-binary=:all:`）单独打一个包。", lab="cause"),
    write(".github/workflows/release-itgc.yml", '''name: release-itgc
on: {push: {tags: ["itgc-v*"]}}
jobs:
  pyz:
    strategy: {matrix: {os: [ubuntu-latest, windows-latest]}}
    runs-on: ${{ matrix.os }}
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with: {python-version: "3.11"}
      - run: pip install shiv && shiv -c gen-itgc -o dist/gen-itgc-${{ runner.os }}.pyz tools/itgc
'''),
    A("CI 里加了 release-itgc 工作流：在 ubuntu 和 windows 两个 runner 上分别用 shiv 打包，产出 `gen-itgc-Linux.pyz` 和 "
      "`gen-itgc-Windows.pyz`，打 `itgc-v*` tag 时自动发布。审计同事用 Windows 版就行。", lab="fix"),
])

session("I_xlsx", "2026-11-02 10:45", "Excel 输出中文列宽不对", **IT, msgs=[
    U("导出的 uar_2026Q3.xlsx 里中文姓名那一列被截断了，英文的列宽度正常。"),
    read("itgc/xlsx.py", '''
def autosize(ws):
    for col in ws.columns:
        values = [str(c.value or "") for c in col]
        ws.column_dimensions[col[0].column_letter].width = max(len(v) for v in values) + 2
'''),
    A("列宽是按 `len()` 算的，一个汉字算 1 个字符，但在 Excel 里汉字要占两个字符宽，所以中文列偏窄。", lab="cause"),
    patch("itgc/xlsx.py", "        ws.column_dimensions[col[0].column_letter].width = max(len(v) for v in values) + 2",
          "        width = max(display_width(v) for v in values) + 2\n"
          "        ws.column_dimensions[col[0].column_letter].width = min(width, 60)"),
    A("新增了 `display_width()`：`unicodedata.east_asian_width` 为 W/F 的字符算 2，其它算 1；列宽 = 最大显示宽度 + 2，上限 60。"
      "重新导出后姓名、部门这几列都显示完整了。", lab="fix"),
    U("好了，谢谢"),
])

session("I_cfg", "2026-11-09 13:20", "gen-itgc config.yaml 校验报错", **IT, msgs=[
    U("新同事跑 gen-itgc 报错：\n```\npydantic_core._pydantic_core.ValidationError: 1 validation error for ItgcConfig\n"
      "controls.0.owner\n  Field required [type=missing, input_value={'id': 'ITGC-01', 'name': '用户访问复核'}, "
      "input_type=dict]\n```"),
    read("config.yaml", '''
controls:
  - id: ITGC-01
    name: 用户访问复核
  - id: ITGC-02
    name: 变更管理
    owner: zhang.wei
'''),
    A("他的 config.yaml 里第一个控制点 ITGC-01 没写 `owner`。我们 11 月初把 control owner（控制负责人）改成了必填，因为证据封面要写负责人。",
      lab="cause"),
    patch("config.example.yaml", "  - id: ITGC-01\n    name: 用户访问复核",
          "  - id: ITGC-01\n    name: 用户访问复核\n    owner: li.na   # 必填：控制负责人"),
    A("config.example.yaml 里补上了 `owner` 示例；同时在加载配置时捕获 `ValidationError`，打印更友好的提示，例如 "
      "`配置错误: controls[0] (ITGC-01) 缺少 owner（控制负责人）`，不再直接抛 pydantic 的原始堆栈。", lab="fix"),
    U("👍"),
])

session("I_leavers", "2026-11-16 15:30", "季度离职人员账号检查", **IT, msgs=[
    U("控制点 ITGC-03 要求离职员工的账号在离职后 24 小时内停用。HR 给了 leavers_2026Q3.csv，帮我做一下检查。"),
    read("data/leavers_2026Q3.csv", '''
工号,姓名,部门,离职日期
E1021,王磊,销售部,2026-07-15
E1107,陈静,财务部,2026-08-29
E1188,刘洋,研发部,2026-09-12
'''),
    run("gen-itgc leavers --hr data/leavers_2026Q3.csv --quarter 2026Q3",
        "共 48 名离职员工；3 个账号超过 24 小时才停用：E1021 (71h)、E1107 (30h)、E1188 (仍为 ACTIVE)"),
    A("比对逻辑：用工号关联 Okta 的 `profile.employeeNumber`，取状态变为 `DEPROVISIONED` 或 `SUSPENDED` 的时间（statusChanged），"
      "减去 HR 的离职日期（按北京时间当天 18:00 算）。48 人里有 3 个例外，其中 E1188 到现在还是 ACTIVE，需要马上让 IT 停用。",
      lab="fix"),
    U("E1188 已经让 IT 停掉了，工单 IT-5521。"),
    A("好的，已经把 E1021、E1107、E1188 记进 exceptions.yaml，E1188 附上工单 IT-5521。"),
])

session("I_tz", "2026-11-25 16:10", "重跑gen-itgc后 证据时间差了8小时", **IT, msgs=[
    U("重跑gen-itgc后，审计说 change 证据里的合并时间比 GitHub 页面上早了 8 小时，他们要北京时间。"),
    search("strftime", "itgc", [("itgc/render.py", 31, '    return dt.strftime("%Y-%m-%d %H:%M")')]),
    read("itgc/render.py", '''
def fmt_time(value: str) -> str:
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return dt.strftime("%Y-%m-%d %H:%M")
'''),
    A("GitHub API 返回的 `mergedAt` 是 UTC（末尾带 Z），`fmt_time` 直接 strftime，没有转时区，所以比北京时间早 8 小时。", lab="cause"),
    patch("itgc/render.py", "    return dt.strftime(\"%Y-%m-%d %H:%M\")",
          "    return dt.astimezone(ZoneInfo(CONFIG.report_tz)).strftime(\"%Y-%m-%d %H:%M\")"),
    run("gen-itgc change --quarter 2026Q3 --out out/change_2026Q3", "wrote 214 records -> out/change_2026Q3/"),
    A("render.py 的 `fmt_time` 现在先 `astimezone(ZoneInfo(CONFIG.report_tz))` 再格式化，config.yaml 新增 `report_tz: "
      "Asia/Shanghai`，evidence.md.j2 的表头标注了 (UTC+8)。重新生成了 Q3 的 change 证据，214 条记录的时间和 GitHub 页面一致。",
      lab="fix"),
])

session("I_ask", "2026-11-30 10:30", "itgc 周一整理", **IT, msgs=[])


# ================================================================ AdSys (explicit, two folders)

C = dict(cwd=ADSYS, root=ADSYS)
CI = dict(cwd=ADINFRA + "/k8s", root=ADINFRA)

session("C_archived", "2026-10-03 20:00", "旧的 Memcached 缓存方案草稿", **C, archived=True, msgs=[
    U("有个想法：素材缓存从 Redis 换成 Memcached，会不会更扛得住热点 key？"),
    A("Memcached 是多线程的，单机吞吐更高，但单个热点 key 的问题一样存在：key 过期时并发回源打到 MySQL 的缓存击穿还是得靠合并请求或者逻辑过期来解决，换存储本身解决不了。"),
    U("那先不换了。"),
    A("好，继续用 Redis。"),
])

session("C_cache_breakdown", "2026-10-05 21:10", "竞价服务热点素材缓存击穿", **C, branch="hotfix/creative-cache", msgs=[
    U("晚上 20:00 大促开始后 bidder 的 p99 从 40ms 飙到 900ms，Redis CPU 打满。监控看是热点广告素材 `creative:8812734` 这个 key "
      "过期的那一瞬间有几千个请求同时回源 MySQL。"),
    A("典型的缓存击穿：热点 key 过期时大量并发请求同时 miss，全部打到 MySQL；MySQL 变慢，请求堆积，连带 Redis 连接也被占满。", lab="cause"),
    read("internal/creative/cache.go", '''
func (c *Cache) GetCreative(ctx context.Context, id int64) (*Creative, error) {
	key := fmt.Sprintf("creative:%d", id)
	if v, err := c.rdb.Get(ctx, key).Bytes(); err == nil {
		return decode(v)
	}
	cr, err := c.repo.Load(ctx, id) // MySQL
	if err != nil {
		return nil, err
	}
	c.rdb.Set(ctx, key, encode(cr), 300*time.Second)
	return cr, nil
}
'''),
    patch("internal/creative/cache.go", "\tcr, err := c.repo.Load(ctx, id) // MySQL",
          "\tv, err, _ := c.sf.Do(key, func() (any, error) { return c.loadAndSet(ctx, id, key) })\n"
          "\tcr, _ := v.(*Creative)"),
    run("go test ./internal/creative/... -run TestGetCreativeConcurrentMiss -v",
        "=== RUN   TestGetCreativeConcurrentMiss\n    cache_test.go:88: db loads = 1 for 5000 concurrent gets\n"
        "--- PASS: TestGetCreativeConcurrentMiss (0.21s)\nPASS\nok  \tadsys/internal/creative\t0.412s"),
    A("修复：`GetCreative` 用 `golang.org/x/sync/singleflight` 合并同一个 key 的并发回源，5000 个并发 miss 只查一次 MySQL；"
      "TTL 从固定 300s 改成 300s + 0~60s 随机抖动，避免大批 key 同一时刻过期（缓存雪崩）。另外给热点素材加了逻辑过期：后台异步刷新，"
      "请求总是先拿旧值。", lab="fix"),
    U("已经上线，p99 回到 45ms 了。"),
])

session("C_freqcap", "2026-10-10 11:00", "频次控制计数不准", **C, msgs=[
    U("广告主反馈：频控设置的是每人每天 3 次，但有用户一天看到了 7 次同一个广告。"),
    read("internal/freqcap/counter.go", '''
func (f *FreqCap) Allow(ctx context.Context, campaign, user string) bool {
	key := fmt.Sprintf("fc:%s:%s:%s", campaign, user, today())
	cnt, _ := f.rdb.Get(ctx, key).Int()
	if cnt >= f.limit {
		return false
	}
	n, _ := f.rdb.Incr(ctx, key).Result()
	if n == 1 {
		f.rdb.Expire(ctx, key, 24*time.Hour)
	}
	return true
}
'''),
    A("有两个问题：1) 先 GET 判断再 INCR，不是原子操作，高并发下多个请求同时读到 2，都认为没超；2) INCR 和 EXPIRE 分两步执行，"
      "进程如果在中间挂掉，这个 key 就永远不过期。", lab="cause"),
    write("internal/freqcap/incr_cap.lua", '''-- KEYS[1] = fc:{campaign}:{user}:{yyyymmdd}, ARGV[1] = limit, ARGV[2] = ttl seconds
local n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
if n > tonumber(ARGV[1]) then
  return 0
end
return 1
'''),
    patch("internal/freqcap/counter.go", "\tcnt, _ := f.rdb.Get(ctx, key).Int()",
          "\tok, err := incrCap.Run(ctx, f.rdb, []string{key}, f.limit, ttlUntilLocalMidnight(user)).Int()"),
    run("go test ./internal/freqcap/...", "ok  \tadsys/internal/freqcap\t1.84s"),
    A("改成 Lua 脚本 `incr_cap.lua`，在 Redis 里原子地完成 INCR、首次 EXPIRE 和上限判断，返回 0 表示超频。key 仍是 "
      "`fc:{campaign}:{user}:{yyyymmdd}`，过期时间算到用户当地零点。压测 2 万 QPS 下没有再出现超过 3 次的情况。", lab="fix"),
])

session("C_crashloop", "2026-10-16 10:00", "bidder 部署到 k8s 后 CrashLoopBackOff", **CI, msgs=[
    U("新版 bidder 部署到 prod-sh 集群后 pod 一直 CrashLoopBackOff。"),
    run("kubectl -n ads get pods -l app=bidder",
        "NAME                      READY   STATUS             RESTARTS      AGE\n"
        "bidder-7d9c8b6f5-2xkqp    0/1     CrashLoopBackOff   6 (2m ago)    9m\n"
        "bidder-7d9c8b6f5-9wq4d    0/1     CrashLoopBackOff   6 (2m ago)    9m"),
    run("kubectl -n ads logs bidder-7d9c8b6f5-2xkqp --previous",
        "panic: config: KAFKA_BROKERS is required\n\ngoroutine 1 [running]:\nmain.mustLoadConfig(...)\n"
        "\t/src/cmd/bidder/main.go:41 +0x1c5"),
    A("新版本把 Kafka 地址从配置文件改成了环境变量 `KAFKA_BROKERS`，但 prod-sh 的 ConfigMap `bidder-env` 里没有加，进程启动就 panic。",
      lab="cause"),
    patch("k8s/overlays/prod-sh/bidder-env.yaml", "  REDIS_ADDR: redis-bidder:6379",
          "  REDIS_ADDR: redis-bidder:6379\n  KAFKA_BROKERS: kafka-0.kafka:9092,kafka-1.kafka:9092,kafka-2.kafka:9092"),
    run("kubectl apply -k k8s/overlays/prod-sh && kubectl -n ads rollout status deploy/bidder",
        "configmap/bidder-env configured\ndeployment.apps/bidder configured\n"
        "deployment \"bidder\" successfully rolled out"),
    A("已在 `bidder-env` ConfigMap 里加上 `KAFKA_BROKERS`，rollout 成功。建议：readinessProbe 的 initialDelaySeconds 从 0 改成 5；"
      "CI 再加一个检查，base 里引用到的环境变量每个 overlay 都必须定义。", lab="fix"),
])

session("C_kafka_lag", "2026-10-22 15:20", "点击日志 Kafka 消费延迟", **C, msgs=[
    U("click-logs 的消费组 lag 涨到 800 万了，广告主报表延迟了两个小时。"),
    run("kafka-consumer-groups.sh --bootstrap-server kafka-0:9092 --describe --group click-etl | head -4",
        "GROUP      TOPIC       PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG\n"
        "click-etl  click-logs  0          918233112       918924001       690889\n"
        "click-etl  click-logs  1          917700012       918391544       691532\n"
        "click-etl  click-logs  2          918004410       918702217       697807"),
    A("click-logs 只有 12 个分区，消费者已经是 12 个实例，再加实例也分不到分区；而且 ETL 每条消息单独写一次 ClickHouse，吞吐被写入拖住了。",
      lab="cause"),
    patch("internal/etl/consumer.go", "\t\tif err := c.sink.Insert(ctx, rec); err != nil {",
          "\t\tbatch = append(batch, rec)\n\t\tif len(batch) >= 5000 || time.Since(last) > time.Second {\n"
          "\t\t\terr := c.sink.InsertBatch(ctx, batch)"),
    run("kafka-topics.sh --bootstrap-server kafka-0:9092 --alter --topic click-logs --partitions 48", ""),
    A("两步：1) ETL 改成攒批写 ClickHouse（5000 条或 1 秒一批），单实例吞吐从 3k/s 提到 40k/s；2) click-logs 分区从 12 扩到 48，"
      "消费者扩到 24 个。lag 在 40 分钟内清零。注意：扩分区后同一个 user_id 映射到的分区会变，短时间内下游按用户的顺序性不保证。",
      lab="fix"),
])

session("C_pacing", "2026-10-26 10:40", "Budget pacing for daily campaigns", **C, branch="feat/pacing", msgs=[
    U("Campaigns with a daily budget spend 80% of it before 10am. Advertisers want the spend spread over the "
      "whole day. How should pacing work in the bidder?"),
    A("Proposal: throttle-based pacing. Split the day into 1440 one-minute slots and build a target cumulative "
      "curve from the last 7 days of traffic, so we follow the traffic shape instead of a flat line. Every "
      "minute compare actual vs target and adjust a participation rate p in [0.01, 1] with a PI controller; "
      "the bidder skips an auction with probability 1-p.", lab="design"),
    U("OK, implement the controller, keep it simple."),
    write("internal/pacing/pacing.go", '''package pacing

// Controller adjusts the share of auctions a campaign takes part in.
type Controller struct {
	Kp, Ki   float64
	integral float64
	rate     float64
}

func (c *Controller) Update(actual, target float64) {
	err := (target - actual) / max(target, 1)
	c.integral = clamp(c.integral+err, -5, 5) // anti-windup
	c.rate = clamp(c.rate+c.Kp*err+c.Ki*c.integral, 0.01, 1)
}

func (c *Controller) ShouldBid(r float64) bool { return r < c.rate }
'''),
    run("go test ./internal/pacing/ -run TestSimulateYesterday -v",
        "    pacing_test.go:57: campaign 5521: 48% spent by 14:00 (was 83% by 10:00)\n--- PASS: TestSimulateYesterday (0.93s)"),
    A("Added internal/pacing/pacing.go: `Controller.Update(actual, target)` runs a PI controller (Kp=0.3, "
      "Ki=0.05, with an anti-windup clamp) once a minute and `ShouldBid()` draws against the participation rate. "
      "Replaying yesterday's traffic, campaign 5521 spends 48% of its budget by 14:00 instead of 83% by 10:00.",
      lab="fix"),
])

session("C_ctr_feature", "2026-11-04 16:00", "CTR 模型特征本地缓存", **C, msgs=[
    U("CTR 预估每次请求都要去 feature-store 拉用户特征，这一步 p99 有 25ms。能不能加个本地缓存？"),
    A("可以做进程内 LRU。用户特征 5 分钟才更新一次，能容忍一两分钟的旧数据。建议用 ristretto，并发性能比 groupcache 的 LRU 好。"),
    patch("internal/ctr/features.go", "\tfeats, err := f.store.Get(ctx, userID)",
          "\tif v, ok := f.cache.Get(userID); ok {\n\t\treturn v.(*Features), nil\n\t}\n"
          "\tfeats, err := f.store.Get(ctx, userID)\n\tf.cache.SetWithTTL(userID, feats, feats.Cost(), 2*time.Minute)"),
    run("go test ./internal/ctr/... -run XXX -bench BenchmarkFeatureLookup -benchmem",
        "BenchmarkFeatureLookup-16    5000000    212 ns/op    48 B/op    1 allocs/op\nok  \tadsys/internal/ctr\t2.311s"),
    A("用 `dgraph-io/ristretto` 做了进程内的特征缓存：MaxCost 1GB，TTL 2 分钟。灰度 10% 流量后命中率 92%，feature-store 的调用量降了 90%，"
      "CTR 打分的 p99 从 25ms 降到 6ms。", lab="fix"),
    U("不错，全量吧。"),
])

session("C_review_webhook", "2026-11-06 14:10", "素材审核回调 504 超时", **C, msgs=[
    U("第三方素材审核平台回调我们的 /callback/review 经常 504，他们超时 5 秒就会重试，结果同一条素材被处理了三次。"),
    read("internal/review/handler.go", '''
func (h *Handler) Callback(w http.ResponseWriter, r *http.Request) {
	ev, err := h.verify(r)
	if err != nil { http.Error(w, "bad signature", 401); return }
	h.repo.UpdateStatus(ev.CreativeID, ev.Result)
	h.media.Transcode(ev.CreativeID)    // ffmpeg, 10s+ for large videos
	h.index.Refresh(ev.CreativeID)
	w.WriteHeader(200)
}
'''),
    A("回调接口里同步做了转码生成缩略图（大视频 ffmpeg 要 10 秒以上）和刷新索引，超过了对方 5 秒的超时，对方重试就又处理一遍。", lab="cause"),
    patch("internal/review/handler.go", "\th.repo.UpdateStatus(ev.CreativeID, ev.Result)\n"
          "\th.media.Transcode(ev.CreativeID)    // ffmpeg, 10s+ for large videos\n\th.index.Refresh(ev.CreativeID)",
          "\tif h.seen.Add(ev.ReviewID) {\n\t\th.producer.Publish(\"creative-review\", ev)\n\t}"),
    A("回调改成了异步：接口只校验签名、按 `review_id` 去重，然后写入 Kafka 的 `creative-review` 主题并立刻返回 200（p99 15ms）；"
      "转码和刷新索引挪到 review-worker 里消费。重复回调因为 review_id 去重不会再被处理多次。", lab="fix"),
    U("好的，已经通知对方。"),
])

session("C_race", "2026-11-11 11:20", "go test -race 报 DATA RACE in budget tracker", **C, msgs=[
    U("CI 上 `go test -race ./...` 挂了：\n```\nWARNING: DATA RACE\nWrite at 0x00c000124a08 by goroutine 41:\n"
      "  adsys/internal/budget.(*Tracker).Add()\n      /src/internal/budget/tracker.go:27 +0x64\n```"),
    run("go test -race ./internal/budget/ -run TestTrackerConcurrent -count=1",
        "==================\nWARNING: DATA RACE\nWrite at 0x00c000124a08 by goroutine 41:\n"
        "  adsys/internal/budget.(*Tracker).Add()\nPrevious read at 0x00c000124a08 by goroutine 39:\n"
        "  adsys/internal/budget.(*Tracker).Spent()\n==================\n--- FAIL: TestTrackerConcurrent (0.02s)\n"
        "    testing.go:1398: race detected during execution of test\nFAIL", code=1),
    read("internal/budget/tracker.go", '''
type Tracker struct {
	spent int64 // micros
}

func (t *Tracker) Add(micros int64) { t.spent += micros }
func (t *Tracker) Spent() int64     { return t.spent }
'''),
    A("`Tracker.spent` 被多个 goroutine 同时读写又没有加锁，是数据竞争。改成 `atomic.Int64`：`Add` 用 `t.spent.Add(micros)`，"
      "`Spent` 用 `t.spent.Load()`，比加 mutex 更轻。", lab="fix"),
    patch("internal/budget/tracker.go", "\tspent int64 // micros", "\tspent atomic.Int64 // micros"),
    run("go test -race ./internal/budget/ -count=5", "ok  \tadsys/internal/budget\t2.113s"),
    A("race 修好了，CI 重跑通过。"),
])

session("C_alert", "2026-11-13 09:40", "bidder p99 延迟告警规则", cwd=ADINFRA + "/monitoring", root=ADINFRA, msgs=[
    U("帮我给 bidder 加一个告警：p99 超过 80ms 持续 5 分钟就发到飞书群。"),
    write("monitoring/rules/bidder-latency.yaml", '''groups:
  - name: bidder-latency
    rules:
      - alert: BidderP99High
        expr: histogram_quantile(0.99, sum by (le) (rate(bidder_request_duration_seconds_bucket[2m]))) > 0.08
        for: 5m
        labels:
          severity: page
          team: ads
        annotations:
          summary: "bidder p99 > 80ms for 5m"
'''),
    run("promtool check rules monitoring/rules/bidder-latency.yaml",
        "Checking monitoring/rules/bidder-latency.yaml\n  SUCCESS: 1 rules found"),
    A("告警规则 `BidderP99High` 已加：`histogram_quantile(0.99, ...) > 0.08` 持续 5m，severity=page；Alertmanager 里 team=ads "
      "的路由发到飞书群 webhook。promtool 校验通过。注意 `sum by (le)` 会把所有机房合在一起算，要分机房告警得改成 `by (le, idc)`。",
      lab="fix"),
    U("先这样，之后再按机房拆。"),
])

session("C_tcf", "2026-11-17 11:00", "TCF consent check for EU bid requests", **C, msgs=[
    U("Legal says we bid with personalised segments on EU requests whose TCF consent string doesn't grant "
      "purpose 4. How do we check this properly?"),
    read("internal/privacy/tcf.go", '''
func HasConsent(tcString string) bool {
	tc, err := iabtcfv2.Decode(tcString)
	if err != nil {
		return false
	}
	return tc.PurposesConsent[1]
}
'''),
    A("We decode the TC string but only look at purpose 1 (store/access information). Personalised ads also "
      "need purpose 3 (create a personalised ads profile) and purpose 4 (select personalised ads), plus vendor "
      "consent for our GVL id.", lab="cause"),
    patch("internal/privacy/tcf.go", "\treturn tc.PurposesConsent[1]",
          "\treturn tc.PurposesConsent[1] && tc.PurposesConsent[3] && tc.PurposesConsent[4] && "
          "tc.VendorConsents[gvlID]"),
    run("go test ./internal/privacy/...", "ok  \tadsys/internal/privacy\t0.204s"),
    A("`CanPersonalize(tc)` now requires purposes 1, 3 and 4 plus vendor consent for our GVL id 1123. Requests "
      "with gdpr=1 that fail the check are still bid on, but contextually only: user segments are stripped "
      "before the CTR model runs.", lab="fix"),
])

session("C_helm", "2026-11-19 22:30", "helm upgrade 卡在 pending-upgrade", **CI, msgs=[
    U("helm upgrade bidder 报错：`Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress`，"
      "上一次发布被我 Ctrl+C 了。"),
    run("helm -n ads history bidder --max 3",
        "REVISION  UPDATED                   STATUS           CHART         DESCRIPTION\n"
        "40        Tue Nov 17 20:11:02 2026  superseded       bidder-1.8.2  Upgrade complete\n"
        "41        Wed Nov 18 21:40:37 2026  deployed         bidder-1.8.3  Upgrade complete\n"
        "42        Thu Nov 19 22:18:55 2026  pending-upgrade  bidder-1.9.0  Preparing upgrade"),
    A("revision 42 停在 `pending-upgrade`：被中断的 upgrade 不会自己清理状态，Helm 以为还有操作在进行。", lab="cause"),
    run("helm -n ads rollback bidder 41", "Rollback was a success! Happy Helming!"),
    run("helm -n ads upgrade bidder charts/bidder -f values/prod-sh.yaml --atomic --timeout 10m",
        "Release \"bidder\" has been upgraded. Happy Helming!\nNAME: bidder\nNAMESPACE: ads\nSTATUS: deployed\nREVISION: 44"),
    A("先 `helm rollback bidder 41` 把卡住的 pending-upgrade 清掉，再重新 upgrade，现在是 revision 44。以后 upgrade 都加 "
      "`--atomic --timeout 10m`：失败会自动回滚，不会再留下 pending 状态。", lab="fix"),
])

session("C_ch_report", "2026-11-20 15:00", "Slow ClickHouse hourly reports", **C, msgs=[
    U("The hourly report in the advertiser dashboard takes 12 s, and 30-day ranges time out completely."),
    run("clickhouse-client -q \"SELECT toStartOfHour(event_time) h, campaign_id, count() FROM ad_events WHERE "
        "advertiser_id = 1021 AND event_time >= now() - INTERVAL 30 DAY GROUP BY h, campaign_id FORMAT Null\" --time",
        "11.842\n(Processed 2.31 billion rows, 27.72 GB)"),
    A("`ad_events` is ordered by `(event_time)` only, so a filter on advertiser_id can't use the primary key "
      "and we scan all 2.3 billion rows for every report.", lab="cause"),
    write("sql/ad_stats_hourly_mv.sql", '''CREATE MATERIALIZED VIEW ad_stats_hourly_mv
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (advertiser_id, campaign_id, hour)
AS SELECT
    advertiser_id, campaign_id, toStartOfHour(event_time) AS hour,
    countIf(event = 'impression') AS impressions,
    countIf(event = 'click') AS clicks,
    sumIf(cost_micros, event = 'impression') AS cost_micros
FROM ad_events
GROUP BY advertiser_id, campaign_id, hour;
'''),
    run("clickhouse-client -q \"SELECT hour, campaign_id, sum(impressions) FROM ad_stats_hourly_mv WHERE "
        "advertiser_id = 1021 AND hour >= now() - INTERVAL 30 DAY GROUP BY hour, campaign_id FORMAT Null\" --time",
        "0.092\n(Processed 1.44 million rows, 34.56 MB)"),
    A("Created the materialized view `ad_stats_hourly_mv` (SummingMergeTree, ORDER BY (advertiser_id, "
      "campaign_id, hour)) fed from ad_events, and the dashboard queries it instead: a 30-day report takes "
      "90 ms instead of timing out. Backfilled history month by month with INSERT ... SELECT.", lab="fix"),
])

session("C_proto", "2026-11-23 10:15", "Protobuf breaking change in BidRequest", **C, msgs=[
    U("After Friday's release the MediaGo exchange adapter gets garbage `device.os` values. We renamed a field in "
      "bid.proto."),
    run("git diff HEAD~1 -- proto/openrtb/bid.proto",
        "@@ -31,8 +31,8 @@ message Device {\n   string ua = 5;\n   string ip = 6;\n-  string os = 7;\n-  string osv = 8;\n"
        "+  string os_version = 7;\n+  string os = 8;"),
    A("The edit swapped the field numbers: `os` moved from 7 to 8 and `os_version` took 7. The adapter still "
      "sends os as field 7, which we now decode as os_version. On the wire only numbers matter: names can "
      "change, numbers can't.", lab="cause"),
    patch("proto/openrtb/bid.proto", "  string os_version = 7;\n  string os = 8;", "  string os = 7;\n  string os_version = 8;"),
    run("buf breaking proto --against '.git#branch=main,ref=HEAD~2'", ""),
    A("Restored the original numbers (os = 7, os_version = 8; the rename osv -> os_version alone is wire "
      "compatible). CI now runs `buf breaking --against '.git#branch=main'`, so renumbering fails the PR, and "
      "the field we deleted in October is marked `reserved 9;`.", lab="fix"),
])

session("C_canary", "2026-11-27 16:40", "bidder 灰度发布 10% 流量", **CI, msgs=[
    U("下周的新版 bidder 想先灰度 10% 流量，观察 1 小时指标再全量，怎么配？"),
    A("可以用 Argo Rollouts 配合 Istio：Rollout 的 canary 步骤控制权重，VirtualService 按 stable/canary 两个 subset 分流，"
      "每一步之间用 AnalysisTemplate 看 Prometheus 指标，不达标自动回滚。"),
    write("k8s/base/bidder-rollout.yaml", '''apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: bidder, namespace: ads}
spec:
  strategy:
    canary:
      trafficRouting:
        istio: {virtualService: {name: bidder-vs, routes: [primary]}, destinationRule: {name: bidder-dr, canarySubsetName: canary, stableSubsetName: stable}}
      steps:
        - setWeight: 10
        - pause: {duration: 1h}
        - analysis: {templates: [{templateName: bidder-slo}]}
        - setWeight: 50
        - pause: {duration: 30m}
'''),
    run("kubectl argo rollouts -n ads get rollout bidder",
        "Name:            bidder\nNamespace:       ads\nStatus:          ॥ Paused\nStrategy:        Canary\n"
        "  Step:          1/5\n  SetWeight:     10\n  ActualWeight:  10"),
    A("bidder 的 Deployment 已换成 Argo Rollouts 的 Rollout：setWeight 10 → 暂停 1 小时 → 自动分析（p99 < 80ms 且错误率 < 0.5%，"
      "PromQL 和延迟告警那条是同一个）→ 50% → 100%。权重由 Istio VirtualService `bidder-vs` 的 stable/canary subset 控制，"
      "分析不通过会自动回滚。现在停在第 1 步，10% 流量。", lab="fix"),
    U("好，周一看数据再决定。"),
])

session("C_ask1", "2026-11-30 09:30", "周一例会前翻一下历史", **C, msgs=[])
session("C_ask2", "2026-11-30 14:00", None, **CI, msgs=[])


# ================================================================ tinykv (auto: git repo only)

K = dict(cwd=TINYKV, root=TINYKV)

session("K_wal", "2026-10-07 20:30", "WAL durability: fsync before ack", **K, msgs=[
    U("If I hard-reset the VM right after a put returns OK, the key is gone after restart. Shouldn't the WAL "
      "prevent that?"),
    read("src/wal.rs", '''
pub fn append(&mut self, rec: &Record) -> Result<()> {
    let buf = rec.encode();
    self.writer.write_all(&buf)?;
    self.writer.flush()?;
    Ok(())
}
'''),
    A("`BufWriter::flush()` only hands the bytes to the kernel's page cache; nothing forces them onto the disk, so "
      "a power loss or VM reset drops the tail of the log even though we already answered OK. We need "
      "`File::sync_data()` (fdatasync) before acknowledging the write.", lab="cause"),
    patch("src/wal.rs", "    self.writer.flush()?;\n    Ok(())", "    self.writer.flush()?;\n    self.writer.get_ref().sync_data()?;\n    Ok(())"),
    run("cargo bench --bench put -- --quick", "put/sync                time:   [2.91 ms 2.95 ms 3.02 ms]"),
    A("Correct now but slow: ~3 ms per put, because every put waits for its own fdatasync. Let me batch them."),
    patch("src/wal.rs", "pub fn append(&mut self, rec: &Record) -> Result<()> {",
          "/// Queues the record; the committer thread writes batches and fsyncs once per batch.\n"
          "pub async fn append(&self, rec: Record) -> Result<()> {"),
    run("cargo bench --bench put -- --quick group_commit",
        "put/group_commit        time:   [61.3 µs 62.0 µs 63.1 µs]\n                        thrpt:  [1.19 Melem/s 1.21 Melem/s 1.22 Melem/s]"),
    A("The WAL now calls `sync_data()` before acking, with group commit: writers enqueue records, a committer "
      "thread writes up to 256 records or 2 ms worth, does one fdatasync and wakes all waiters. Writes survive "
      "power loss, and with 32 concurrent writers we get ~1.2M puts/s. `wal.sync = \"always\" | \"batch\" | "
      "\"none\"` is configurable in tinykv.toml.", lab="fix"),
])

session("K_compaction", "2026-10-13 22:00", "Write stalls from L0 compaction backlog", **K, msgs=[
    U("During the ycsb load phase throughput drops to zero for seconds at a time. Logs say:\n"
      "WARN tinykv::lsm: stalling writes: 24 L0 files >= level0_stop_writes_trigger (24)"),
    read("src/lsm/compaction.rs", '''
pub struct CompactionOptions {
    pub max_background_compactions: usize,   // 1
    pub level0_stop_writes_trigger: usize,   // 24
    pub target_file_size: u64,               // 64 MiB
}
'''),
    A("Compaction is single-threaded, and an L0->L1 compaction picks every overlapping L1 file, which with 64 MiB "
      "targets means rewriting ~1.5 GB each time. Meanwhile memtable flushes keep adding L0 files until the stop "
      "trigger is hit and all writes block.", lab="cause"),
    patch("src/lsm/compaction.rs", "    pub max_background_compactions: usize,   // 1",
          "    pub max_background_compactions: usize,   // 4\n    pub max_subcompactions: usize,           // 4\n"
          "    pub level0_slowdown_writes_trigger: usize, // 20"),
    run("cargo run --release --bin ycsb -- load --records 10000000",
        "load: 10000000 records in 32.1s, throughput: 312k ops/s, max stall: 0 ms, slowdowns: 41"),
    A("Background compactions raised from 1 to 4, L0->L1 compactions split into subcompactions by key range, and "
      "a soft `level0_slowdown_writes_trigger = 20` delays each write by 1 ms instead of stopping. Load phase: "
      "no hard stalls, 312k ops/s.", lab="fix"),
])

session("K_borrow", "2026-10-18 17:30", "E0502 borrow error in MemTable::scan", **K, msgs=[
    U("Can't get this to compile:\n```\nerror[E0502]: cannot borrow `*self` as mutable because it is also borrowed "
      "as immutable\n  --> src/memtable.rs:87:13\n   |\n84 |         for (k, v) in self.map.range(start..end) {\n"
      "   |                       -------------------------- immutable borrow occurs here\n...\n"
      "87 |             self.record_read(k.len() + v.len());\n   |             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ "
      "mutable borrow occurs here\n```"),
    read("src/memtable.rs", '''
    pub fn scan(&mut self, start: &[u8], end: &[u8]) -> Vec<(Bytes, Bytes)> {
        let mut out = Vec::new();
        for (k, v) in self.map.range(start..end) {
            out.push((k.clone(), v.clone()));
            self.record_read(k.len() + v.len());
        }
        out
    }
'''),
    A("`record_read` takes `&mut self`, but the range iterator is still borrowing `self.map`. Since "
      "`record_read` only touches `self.stats`, borrow the two fields separately: `let stats = &mut self.stats;` "
      "before the loop and `stats.bytes_read += ...` inside. Disjoint field borrows are fine for the borrow "
      "checker; going through a `&mut self` method is not. (Alternative: make the counter an `AtomicU64` so the "
      "method can take `&self`.)", lab="fix"),
    patch("src/memtable.rs", "        for (k, v) in self.map.range(start..end) {\n            out.push((k.clone(), v.clone()));\n"
          "            self.record_read(k.len() + v.len());",
          "        let stats = &mut self.stats;\n        for (k, v) in self.map.range(start..end) {\n"
          "            out.push((k.clone(), v.clone()));\n            stats.bytes_read += (k.len() + v.len()) as u64;"),
    run("cargo build", "   Compiling tinykv v0.3.0 (/home/dev/oss/tinykv)\n    Finished `dev` profile [unoptimized + debuginfo] target(s) in 4.21s"),
    A("Compiles now; I went with the split borrow."),
])

session("K_bloom", "2026-10-28 21:00", "Bloom filter sizing for SST files", **K, msgs=[
    U("Point lookups for keys that don't exist still read 3-4 SST blocks. Is the bloom filter even working?"),
    read("src/sst/bloom.rs", '''
pub const BITS_PER_KEY: usize = 4;
pub const NUM_HASHES: u32 = 2;
'''),
    A("It works, it's just tiny: 4 bits per key with k=2 gives roughly a 14% false-positive rate per table, and "
      "a miss consults one table per level, so most misses still end in a block read.", lab="cause"),
    patch("src/sst/bloom.rs", "pub const BITS_PER_KEY: usize = 4;\npub const NUM_HASHES: u32 = 2;",
          "pub const BITS_PER_KEY: usize = 10;\n/// k = round(bits_per_key * ln 2)\npub const NUM_HASHES: u32 = 7;"),
    run("cargo test bloom -- --nocapture",
        "running 4 tests\nbloom::tests::fp_rate: measured fp rate 0.0082 (target 0.01)\n"
        "test result: ok. 4 passed; 0 failed; 0 ignored"),
    A("Bloom filters now use 10 bits per key and k=7 (about ln2 x 10), with double hashing (h1 + i*h2) derived "
      "from one xxh3 64-bit hash. Measured false-positive rate 0.82%, so lookups for missing keys read ~0.05 "
      "blocks on average. Memory cost: 1.25 bytes per key.", lab="fix"),
])

session("K_clippy", "2026-11-02 19:00", "Fix clippy warnings blocking CI", **K, msgs=[
    U("CI now runs `cargo clippy --all-targets -- -D warnings` and fails with a pile of needless_range_loop and "
      "redundant_clone errors."),
    run("cargo clippy --all-targets -- -D warnings 2>&1 | grep -E '^error' | sort | uniq -c",
        "      6 error: the loop variable `i` is only used to index `levels`\n      3 error: redundant clone\n"
        "      1 error: this `impl` can be derived", code=1),
    A("Ten errors, three kinds. `cargo clippy --fix` handles most of them; the loop in version.rs needs a manual "
      "rewrite because it reads `levels[i + 1]` too."),
    run("cargo clippy --fix --allow-dirty --all-targets", "    Fixed src/lsm/mod.rs (4 fixes)\n    Fixed src/sst/builder.rs (3 fixes)\n"
        "    Fixed src/options.rs (1 fix)"),
    patch("src/lsm/version.rs", "for i in 0..self.levels.len() - 1 {\n    let (a, b) = (&self.levels[i], &self.levels[i + 1]);",
          "for pair in self.levels.windows(2) {\n    let (a, b) = (&pair[0], &pair[1]);"),
    run("cargo clippy --all-targets -- -D warnings", "    Checking tinykv v0.3.0 (/home/dev/oss/tinykv)\n    Finished `dev` profile in 6.02s"),
    A("Fixed all 10: index loops over `levels` became `iter().enumerate()` (needless_range_loop), removed 3 "
      "redundant `.clone()` calls, derived `Default` for `Options`, and the pairwise loop in src/lsm/version.rs "
      "now uses `windows(2)`. Clippy is clean with `-D warnings`.", lab="fix"),
])

session("K_flaky", "2026-11-09 20:40", "test_concurrent_put hangs intermittently", **K, msgs=[
    U("tests::test_concurrent_put sometimes hangs forever on CI until the 60 minute job timeout kills it. I've "
      "never seen it locally."),
    run("for i in $(seq 200); do timeout 20 cargo test -q test_concurrent_put >/dev/null || { echo \"hang at $i\"; break; }; done",
        "hang at 137"),
    read("src/server.rs", '''
    pub async fn put(&self, key: Bytes, value: Bytes) -> Result<()> {
        let mut state = self.state.lock().unwrap();   // std::sync::Mutex
        let seq = state.next_seq();
        self.wal.append(Record::put(seq, key, value)).await?;
        state.memtable.insert(seq, key, value);
        Ok(())
    }
'''),
    A("`Server::put` holds a `std::sync::Mutex` guard across `.await`. `#[tokio::test]` uses a current-thread "
      "runtime: while the first task is parked at the WAL await holding the lock, a second task calls `lock()`, "
      "blocks the only thread, and the first task can never be polled again, so it's a deadlock. CI machines "
      "have fewer cores and different timing, so it shows up there.", lab="cause"),
    patch("src/server.rs", "        let mut state = self.state.lock().unwrap();   // std::sync::Mutex\n        let seq = state.next_seq();",
          "        let seq = { self.state.lock().unwrap().next_seq() }; // guard dropped before await"),
    run("for i in $(seq 500); do timeout 20 cargo test -q test_concurrent_put >/dev/null || break; done; echo done $i",
        "done 500"),
    A("Fixed by never holding the lock across an await: the sequence number is taken inside a short block, the "
      "WAL append happens after, and the memtable insert takes the lock again. Added "
      "`#![deny(clippy::await_holding_lock)]` to lib.rs so it can't come back. 500 iterations pass.", lab="fix"),
])

session("K_snapshot", "2026-11-16 21:00", "Iterators see writes made after creation", **K, msgs=[
    U("An iterator created before a batch of puts sees some of the new keys. I expected snapshot semantics."),
    A("The memtable iterator walks the live skiplist without any sequence-number bound, so entries inserted "
      "while it's open are visible if they land ahead of the cursor.", lab="cause"),
    patch("src/iter.rs", "pub fn new(mem: Arc<MemTable>, ssts: Vec<SstIter>) -> Self {",
          "pub fn new(mem: Arc<MemTable>, ssts: Vec<SstIter>, snapshot_seq: u64) -> Self {"),
    run("cargo test snapshot", "running 2 tests\ntest iter::tests::test_iterator_snapshot_isolation ... ok\n"
        "test iter::tests::test_snapshot_survives_flush ... ok\ntest result: ok. 2 passed"),
    A("Iterators now capture the last committed sequence number (`last_seq.load(Acquire)`) when they are "
      "created and skip every entry with a higher seq, both in the memtable and in the SST merge. Added "
      "`test_iterator_snapshot_isolation` and a test that the snapshot survives a memtable flush.", lab="fix"),
])

session("K_crc_zh", "2026-11-21 23:10", "断电后 WAL checksum mismatch 无法启动", **K, msgs=[
    U("断电测试之后重启报错：`Error: Corruption(\"wal record checksum mismatch at offset 73400320\")`，整个库都打不开了。"),
    run("cargo run -q --bin tinykv-inspect -- wal data/wal/000042.log --tail 3",
        "offset 73400192 len 96   crc ok\noffset 73400288 len 32   crc ok\n"
        "offset 73400320 len 4096 crc MISMATCH (stored 0x00000000, computed 0x9a3f11c2)  <EOF at 73402112>"),
    A("最后一条记录是断电时没写完的 torn write：长度字段写进去了，数据和 CRC 没写完（stored 0x00000000），而且它正好在最后一个 WAL 文件的末尾。"
      "这种情况不应该让整个库起不来。", lab="cause"),
    patch("src/wal.rs", "            return Err(Error::Corruption(format!(\"wal record checksum mismatch at offset {off}\")));",
          "            if is_last_file && reader.is_tail(off, len) {\n"
          "                warn!(\"truncating torn tail record at offset {off}\");\n"
          "                return Ok(Recovery::TruncatedAt(off));\n            }\n"
          "            return Err(Error::Corruption(format!(\"wal record checksum mismatch at offset {off}\")));"),
    run("cargo test recovery", "test wal::tests::recover_truncates_torn_tail ... ok\ntest wal::tests::corrupt_middle_is_error ... ok\n"
        "test result: ok. 2 passed"),
    A("恢复逻辑改了：只有最后一个 WAL 文件末尾的记录校验失败时，才当作断电造成的 torn write，截断到最后一条完好的记录（offset 73400320）"
      "并打 WARN；文件中间位置的 CRC 错误仍然报 Corruption。这和 RocksDB 的 kTolerateCorruptedTailRecords 模式一致。", lab="fix"),
])

session("K_criterion", "2026-11-25 21:30", "Criterion benchmarks for get/put/scan", cwd=TINYKV + "/benches", root=TINYKV,
        branch="bench/criterion", msgs=[
    U("Set up proper criterion benchmarks so we can compare PRs: get, put and scan on 1M keys."),
    write("benches/kv.rs", '''use criterion::{criterion_group, criterion_main, Criterion};

fn bench_get(c: &mut Criterion) {
    let db = fixture::loaded_db(1_000_000, 42);
    c.bench_function("get/hit", |b| b.iter(|| db.get(&fixture::existing_key())));
    c.bench_function("get/miss", |b| b.iter(|| db.get(&fixture::missing_key())));
}

criterion_group!(benches, bench_get, bench_put, bench_scan);
criterion_main!(benches);
'''),
    patch("Cargo.toml", "[dev-dependencies]", "[dev-dependencies]\ncriterion = \"0.5\"\n\n[[bench]]\nname = \"kv\"\nharness = false"),
    run("cargo bench --bench kv -- --save-baseline main",
        "get/hit                 time:   [412.1 ns 418.3 ns 425.0 ns]\nget/miss                time:   [96.2 ns 98.0 ns 101.4 ns]\n"
        "put/batch               time:   [61.8 µs 62.4 µs 63.3 µs]\nscan/100                time:   [8.1 µs 8.3 µs 8.4 µs]"),
    A("Added benches/kv.rs with criterion 0.5: get/hit, get/miss, put/batch and scan/100 on a 1M-key dataset "
      "generated from a fixed seed. Save a baseline on main with `cargo bench --bench kv -- --save-baseline main`, "
      "then on a PR branch run `cargo bench --bench kv -- --baseline main` to see the change per benchmark.",
      lab="fix"),
    U("nice"),
])

session("K_ask", "2026-11-30 20:00", "tinykv: what did I do last month", **K, msgs=[])


# ================================================================ crawler (auto: git repo only)

W = dict(cwd=CRAWLER, root=CRAWLER)

session("W_403", "2026-10-04 15:00", "爬虫被 403 封了", **W, msgs=[
    U("抓 `https://www.example-mall.cn/list?page=N` 的商品列表，跑到第 30 页左右开始全是 403 Forbidden。"),
    read("crawler/fetch.py", '''
def fetch(url: str) -> str:
    resp = requests.get(url, timeout=10)
    resp.raise_for_status()
    return resp.text
'''),
    A("请求用的是默认 UA `python-requests/2.32.3`，而且请求之间没有任何间隔，连续请求很快就被识别成爬虫，把 IP 封了。", lab="cause"),
    patch("crawler/fetch.py", "    resp = requests.get(url, timeout=10)",
          "    throttle.wait(host_of(url))            # 随机 1.5~4s，且不小于 robots.txt 的 Crawl-delay\n"
          "    resp = session.get(url, headers={\"User-Agent\": ua_pool.pick()}, timeout=10)"),
    run("python -m crawler.run --site example-mall --pages 1-100", "100/100 pages ok, 403: 0, 耗时 6m12s"),
    A("改了三处：1) 从 `ua_pool.txt` 轮换常见浏览器的 User-Agent；2) 请求间隔随机 1.5~4 秒，并遵守 robots.txt 的 Crawl-delay: 2；"
      "3) 遇到 403/429 指数退避（最多 3 次），仍失败就暂停这个站点 10 分钟。现在 100 页全部成功。", lab="fix"),
    U("可以，先这样跑。"),
])

session("W_playwright", "2026-10-11 16:30", "Playwright 页面加载超时", **W, msgs=[
    U("有个站点是前端渲染的，用 Playwright 无头浏览器抓，经常报 `playwright._impl._errors.TimeoutError: Page.goto: "
      "Timeout 30000ms exceeded.`"),
    read("crawler/browser.py", '''
async def render(page, url: str) -> str:
    await page.goto(url, wait_until="networkidle")
    return await page.content()
'''),
    A("`wait_until=\"networkidle\"` 要等到 500ms 内没有任何网络请求，但这个站点有埋点上报和长轮询，请求一直不断，所以永远等不到 networkidle。",
      lab="cause"),
    patch("crawler/browser.py", "    await page.goto(url, wait_until=\"networkidle\")",
          "    await page.route(re.compile(r\"\\.(png|jpe?g|webp|woff2?)$|/collect\\?\"), lambda r: r.abort())\n"
          "    await page.goto(url, wait_until=\"domcontentloaded\")\n"
          "    await page.wait_for_selector(\".goods-item\", timeout=15000)"),
    run("python -m crawler.run --site spa-shop --pages 1-50 --browser", "50/50 pages ok, 平均 2.1s/页, 超时 0"),
    A("改成 `wait_until=\"domcontentloaded\"`，再 `wait_for_selector(\".goods-item\")` 等真正要的元素出现；同时用 `page.route` "
      "拦掉图片、字体和统计脚本。平均每页 2.1 秒，不再超时。", lab="fix"),
])

session("W_dedup", "2026-10-24 10:10", "URL 去重改用 Redis 布隆过滤器", **W, msgs=[
    U("待抓队列里有大量重复 URL，现在用 Redis set 存了 3000 万个 URL，占了 4G 内存。"),
    A("可以换成布隆过滤器：3000 万个元素、误判率 0.1%，理论上只要 54MB 左右。Redis 装了 RedisBloom 模块的话可以直接用 "
      "`BF.RESERVE` / `BF.ADD`。另外要先做 URL 规范化（去掉 utm_ 参数、query 排序、去掉 #fragment），否则同一页面的不同写法会漏判。",
      lab="plan"),
    run("redis-cli MODULE LIST", "1) 1) \"name\"\n   2) \"bf\"\n   3) \"ver\"\n   4) (integer) 20612"),
    run("redis-cli BF.RESERVE crawler:seen 0.001 50000000", "OK"),
    patch("crawler/dedup.py", "    return r.sadd(\"crawler:seen\", url) == 1",
          "    return r.execute_command(\"BF.ADD\", \"crawler:seen\", normalize_url(url)) == 1"),
    A("去重改好了：`normalize_url()` 去掉 utm_*、spm 参数和 fragment 并把 query 排序；`BF.ADD crawler:seen` 返回 1 才入队。"
      "布隆过滤器按 5000 万容量、0.1% 误判率创建，内存约 90MB，原来的 set 已删除。代价是约千分之一的新 URL 会被误判为已抓过而漏掉。",
      lab="fix"),
])

session("W_gbk", "2026-11-03 11:15", "老网站页面解析乱码", **W, msgs=[
    U("有几个老网站抓下来的标题全是乱码，类似 `ÉÌÆ·ÁÐ±í`。"),
    run("curl -sI http://old-bbs.example.com.cn/forum.php | grep -i content-type", "Content-Type: text/html"),
    A("响应头里没有 charset，requests 按 HTTP 规范默认用 ISO-8859-1 解码，但页面实际是 GBK（meta 里写的是 gb2312）。", lab="cause"),
    patch("crawler/fetch.py", "    return resp.text",
          "    if \"charset\" not in resp.headers.get(\"content-type\", \"\").lower():\n"
          "        resp.encoding = sniff_meta_charset(resp.content) or resp.apparent_encoding\n"
          "    if resp.encoding and resp.encoding.lower() in (\"gb2312\", \"gbk\"):\n        resp.encoding = \"gb18030\"\n"
          "    return resp.text"),
    run("python -m crawler.run --site old-bbs --pages 1 --print-title", "标题: 商品列表"),
    A("修复：响应头没有 charset 时，先读 HTML 里的 `<meta charset>`，再退回 charset_normalizer 猜测；gb2312/gbk 一律按 gb18030 解码"
      "（它是超集，生僻字不会丢）。乱码问题解决了。", lab="fix"),
])

session("W_cron", "2026-11-14 20:00", "每日全量抓取部署到服务器", **W, msgs=[
    U("想把每天凌晨 3 点的全量抓取部署到那台 4 核的服务器上，用 crontab 还是 systemd？"),
    A("推荐 systemd timer：自带日志（journalctl）、可以设超时和失败重试、机器关机错过了还能补跑，也方便防止两次运行重叠。"),
    write("deploy/crawler-daily.service", '''[Unit]
Description=crawler daily full crawl
After=network-online.target

[Service]
Type=oneshot
User=crawler
WorkingDirectory=/opt/crawler
ExecStart=/usr/bin/flock -n /run/crawler.lock /opt/crawler/.venv/bin/python -m crawler.run --all
TimeoutStartSec=4h
'''),
    write("deploy/crawler-daily.timer", '''[Unit]
Description=run crawler-daily at 03:00

[Timer]
OnCalendar=*-*-* 03:00:00 Asia/Shanghai
Persistent=true

[Install]
WantedBy=timers.target
'''),
    run("sudo systemctl daemon-reload && sudo systemctl enable --now crawler-daily.timer && systemctl list-timers crawler-daily.timer",
        "NEXT                        LEFT     LAST PASSED UNIT                ACTIVATES\n"
        "Sun 2026-11-15 03:00:00 CST 6h left  n/a  n/a    crawler-daily.timer crawler-daily.service"),
    A("部署好了：`crawler-daily.service`（Type=oneshot，跑 `python -m crawler.run --all`，最长 4 小时，用 flock 防止重叠）+ "
      "`crawler-daily.timer`（每天北京时间 03:00，Persistent=true，错过会补跑）。日志用 `journalctl -u crawler-daily` 查看。",
      lab="fix"),
])

session("W_sem", "2026-11-18 14:20", "Per-host concurrency limit with aiohttp", **W, branch="feat/async-fetch", msgs=[
    U("I'm moving fetch to aiohttp. How do I cap it at 8 concurrent requests per host without one slow host "
      "blocking all the others?"),
    A("Keep a `defaultdict(lambda: asyncio.Semaphore(8))` keyed by hostname and acquire that host's semaphore "
      "inside `fetch()`; a global `TCPConnector(limit=64)` caps total sockets. `limit_per_host=8` on the "
      "connector alone would also cap connections, but the semaphore lets us hold the slot while we sleep the "
      "per-host crawl delay.", lab="design"),
    write("crawler/afetch.py", '''import asyncio
from collections import defaultdict
from urllib.parse import urlsplit

import aiohttp

_host_slots: defaultdict[str, asyncio.Semaphore] = defaultdict(lambda: asyncio.Semaphore(8))

async def fetch(session: aiohttp.ClientSession, url: str) -> str:
    host = urlsplit(url).hostname or ""
    async with _host_slots[host]:
        await throttle.wait_async(host)
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=20)) as resp:
            resp.raise_for_status()
            return await resp.text()
'''),
    run("python -m crawler.run --site all --async", "1200 pages in 3m05s (requests version: 14m02s)"),
    A("New aiohttp fetcher in crawler/afetch.py: per-host `asyncio.Semaphore(8)` plus `TCPConnector(limit=64)`; "
      "the robots.txt delay is slept while holding the host's slot, so a slow host only blocks itself. 1,200 "
      "pages in about 3 minutes instead of 14.", lab="fix"),
])

session("W_upsert", "2026-11-26 10:30", "商品数据入库 upsert", **W, msgs=[
    U("入库的时候报 `psycopg2.errors.UniqueViolation: duplicate key value violates unique constraint \"goods_url_key\"`，"
      "同一个商品第二天再抓就插不进去。"),
    A("现在用的是普通 INSERT，而 goods.url 有唯一约束，重复抓到的商品插入就冲突了。应该用 upsert。", lab="cause"),
    patch("crawler/store.py", "INSERT INTO goods (url, title, price, shop) VALUES %s",
          "INSERT INTO goods (url, title, price, shop) VALUES %s\nON CONFLICT (url) DO UPDATE SET\n"
          "    title = EXCLUDED.title, price = EXCLUDED.price, updated_at = now()\n"
          "WHERE goods.price IS DISTINCT FROM EXCLUDED.price OR goods.title IS DISTINCT FROM EXCLUDED.title\n"
          "RETURNING (xmax = 0) AS inserted"),
    run("python -m crawler.run --site example-mall --pages 1-5", "写入 240 条：新增 12，更新 31，未变化 197"),
    A("改成了 `ON CONFLICT (url) DO UPDATE`，只在价格或标题变化时才更新（用 `IS DISTINCT FROM` 判断），没变化的行不会产生写入；"
      "价格变化同时写进 `goods_price_history` 表，方便以后画价格曲线。", lab="fix"),
    U("好的"),
])

session("W_proxy", "2026-11-28 15:00", "代理池失效 IP 检测", **W, msgs=[
    U("买的代理池里很多 IP 是死的，请求经常报 `requests.exceptions.ProxyError: Cannot connect to proxy`。"),
    write("crawler/proxy_pool.py", '''class ProxyPool:
    """Scored proxies: +1 on success, -3 on failure, dropped at <= 0."""

    def __init__(self, proxies: list[str]):
        self.score = {p: 5 for p in proxies}

    def pick(self) -> str:
        alive = [p for p, s in self.score.items() if s > 0]
        return random.choices(alive, weights=[self.score[p] for p in alive])[0]

    def report(self, proxy: str, ok: bool) -> None:
        self.score[proxy] = min(self.score[proxy] + 1, 10) if ok else self.score[proxy] - 3
'''),
    run("python -m crawler.proxy_pool --check", "共 200 个代理，可用 137，平均延迟 820ms"),
    A("加了代理池健康检查：每 5 分钟用 3 秒超时探测一次，成功 +1 分、失败 -3 分，分数 ≤ 0 的踢掉；请求时按分数加权随机选代理，"
      "遇到 `ProxyError` 立刻换下一个并扣分。现在 200 个代理里可用 137 个。", lab="fix"),
])

session("W_ask", "2026-11-30 11:00", "crawler 复盘", **W, msgs=[])


# ================================================================ Home (no project; never gold, never asked from)

session("H_git_proxy", "2026-10-10 09:00", "git 全局代理设置", cwd="/home/dev", msgs=[
    U("git clone github 上的仓库特别慢，怎么给 git 设置代理？"),
    A("只给 GitHub 走代理：`git config --global http.https://github.com.proxy socks5h://127.0.0.1:7890`。"
      "SSH 方式 clone 的话要在 ~/.ssh/config 里给 github.com 配 `ProxyCommand nc -X 5 -x 127.0.0.1:7890 %h %p`。"),
    U("好了，快多了。"),
    A("👍 取消代理用 `git config --global --unset http.https://github.com.proxy`。"),
])

session("H_zsh", "2026-10-30 22:00", "Slow zsh prompt in big repos", cwd="/home/dev", msgs=[
    U("My zsh prompt takes about 2 seconds to appear inside big git repos. Why?"),
    run("zsh -i -c 'zmodload zsh/zprof; source ~/.zshrc; zprof' | head -5",
        "num  calls                time                       self            name\n"
        " 1)   12        1912.33   159.36   94.20%   1912.33   159.36   94.20%  git_prompt_info"),
    A("`git_prompt_info` from oh-my-zsh runs `git status` with untracked files on every prompt. Set "
      "`DISABLE_UNTRACKED_FILES_DIRTY=true` or switch to powerlevel10k, whose gitstatusd caches the status."),
    U("switched to p10k, instant now"),
])

session("H_ssh", "2026-11-08 21:00", "ssh 跳板机配置", cwd=None, msgs=[
    U("怎么配置 ssh 通过跳板机直接连内网服务器？"),
    A("在 ~/.ssh/config 里写：\n```\nHost bastion\n  HostName bastion.corp.example.com\n  User dev\n\nHost 10.20.*\n"
      "  ProxyJump bastion\n  User deploy\n```\n之后直接 `ssh 10.20.3.14` 就会经过跳板机。"),
    U("可以了"),
    A("另外建议给 bastion 配 `ControlMaster auto` 和 `ControlPersist 10m`，复用连接会快很多。"),
])

session("H_redis_evict", "2026-11-15 10:00", "缓存穿透、击穿、雪崩的区别", cwd=None, msgs=[
    U("面试被问到缓存穿透、缓存击穿、缓存雪崩有什么区别，帮我整理一下。"),
    A("穿透：查询根本不存在的数据，每次都打到数据库，用布隆过滤器或缓存空值解决。击穿：某个热点 key 过期瞬间大量并发请求同时回源，"
      "用互斥锁 / singleflight 合并请求或逻辑过期解决。雪崩：大量 key 同一时间过期或缓存整体宕机，用过期时间加随机抖动、多级缓存和限流降级解决。"),
    U("Redis 的淘汰策略 allkeys-lru 和 volatile-lru 呢？"),
    A("allkeys-lru 在所有 key 里按 LRU 淘汰；volatile-lru 只淘汰设置了过期时间的 key。纯缓存场景一般用 allkeys-lru。"),
])

session("H_docker", "2026-11-22 18:00", None, cwd="/home/dev", msgs=[
    U("Docker 把磁盘占满了，怎么清理？"),
    run("docker system df", "TYPE            TOTAL     ACTIVE    SIZE      RECLAIMABLE\nImages          87        6         61.2GB    52.9GB (86%)\n"
        "Build Cache     412       0         48.3GB    48.3GB"),
    run("docker builder prune -af && docker image prune -af --filter until=168h", "Total reclaimed space: 91.4GB"),
    A("清掉了 48GB 的 build cache 和一周以前的无用镜像，共释放 91.4GB。可以在 /etc/docker/daemon.json 里配 builder 的 gc 策略自动清理。"),
])


# ================================================================ queries
# (category, current session key, query, gold refs "SESSION_KEY:label" or "SESSION_KEY")
# ``lang`` is derived from the query text (CJK only -> zh, CJK + Latin words -> mixed, else en).

QUERIES: list[tuple[str, str, str, list[str]]] = [
    # ---------------- identifier: exact symbols, paths, error codes, commands
    ("identifier", "L_ask1", "SignatureVerificationError", ["L_webhook_sig:cause", "L_webhook_sig:fix"]),
    ("identifier", "L_ask2", "invoices_number_key", ["L_invoice_race:cause", "L_invoice_race:fix"]),
    ("identifier", "L_ask1", "worker_max_tasks_per_child", ["L_celery_oom:fix"]),
    ("identifier", "L_ask2", "Multiple head revisions are present", ["L_alembic_heads:fix"]),
    ("identifier", "L_ask1", "httpx.ReadTimeout in test_login_refresh_token", ["L_flaky_login:cause", "L_flaky_login:fix"]),
    ("identifier", "L_ask2", "ROUND_HALF_UP", ["L_vat_round:fix"]),
    ("identifier", "L_ask1", "fonts-noto-cjk", ["L_pdf_fonts:fix"]),
    ("identifier", "L_ask2", "exec format error", ["L_deploy_zh:cause", "L_deploy_zh:fix"]),
    ("identifier", "L_ask1", "refund_exceeds_balance", ["L_refund:design", "L_refund:fix"]),
    ("identifier", "L_ask2", "invoices_plan_id_fkey", ["L_refund_mixed:cause"]),
    ("identifier", "L_ask1", "TooManyConnectionsError", ["L_pg_pool:cause", "L_pg_pool:fix"]),
    ("identifier", "L_ask2", "ZERO_DECIMAL", ["L_jpy:fix"]),
    ("identifier", "I_ask", "X-Rate-Limit-Reset", ["I_okta:fix"]),
    ("identifier", "I_ask", "ItgcConfig controls.0.owner Field required", ["I_cfg:cause", "I_cfg:fix"]),
    ("identifier", "I_ask", "UnjustifiedException", ["I_gh_prs:exc"]),
    ("identifier", "I_ask", "No module named 'pydantic_core._pydantic_core'", ["I_zipapp:cause", "I_zipapp:fix"]),
    ("identifier", "C_ask1", "singleflight", ["C_cache_breakdown:fix"]),
    ("identifier", "C_ask2", "KAFKA_BROKERS is required", ["C_crashloop:cause"]),
    ("identifier", "C_ask2", "another operation (install/upgrade/rollback) is in progress", ["C_helm:cause", "C_helm:fix"]),
    ("identifier", "C_ask1", "ad_stats_hourly_mv", ["C_ch_report:fix"]),
    ("identifier", "C_ask1", "BidderP99High", ["C_alert:fix"]),
    ("identifier", "C_ask1", "incr_cap.lua", ["C_freqcap:fix"]),
    ("identifier", "C_ask1", "(*Tracker).Add DATA RACE", ["C_race:fix"]),
    ("identifier", "C_ask1", "buf breaking", ["C_proto:fix"]),
    ("identifier", "K_ask", "E0502", ["K_borrow:fix"]),
    ("identifier", "K_ask", "level0_stop_writes_trigger", ["K_compaction:cause", "K_compaction:fix"]),
    ("identifier", "K_ask", "sync_data", ["K_wal:cause", "K_wal:fix"]),
    ("identifier", "K_ask", "await_holding_lock", ["K_flaky:fix"]),
    ("identifier", "K_ask", "wal record checksum mismatch at offset", ["K_crc_zh:cause", "K_crc_zh:fix"]),
    ("identifier", "W_ask", "Page.goto: Timeout 30000ms exceeded", ["W_playwright:cause", "W_playwright:fix"]),
    ("identifier", "W_ask", "BF.ADD crawler:seen", ["W_dedup:fix"]),
    ("identifier", "W_ask", "goods_url_key", ["W_upsert:cause", "W_upsert:fix"]),
    ("identifier", "W_ask", "ProxyError", ["W_proxy:fix"]),

    # ---------------- keyword: a few words a user would type
    ("keyword", "L_ask1", "stripe webhook raw body", ["L_webhook_sig:cause", "L_webhook_sig:fix"]),
    ("keyword", "L_ask2", "duplicate receipt emails webhook retries", ["L_webhook_dup:plan", "L_webhook_dup:fix"]),
    ("keyword", "L_ask1", "idempotency key", ["L_webhook_dup:plan", "L_webhook_dup:fix", "L_recon_zh:fix"]),
    ("keyword", "L_ask2", "invoice counter row lock", ["L_invoice_race:fix"]),
    ("keyword", "L_ask1", "UniqueViolation duplicate key", ["L_invoice_race:cause", "L_invoice_race:fix"]),
    ("keyword", "L_ask2", "VAT rounding", ["L_vat_round:cause", "L_vat_round:fix"]),
    ("keyword", "L_ask1", "JWKS mock respx", ["L_flaky_login:fix"]),
    ("keyword", "L_ask2", "ECB rates redis", ["L_fx_cache:fix"]),
    ("keyword", "L_ask1", "statements worker memory", ["L_celery_oom:cause", "L_celery_oom:fix"]),
    ("keyword", "L_ask2", "mypy strict domain", ["L_lint:fix"]),
    ("keyword", "L_ask1", "partial refund status", ["L_refund:design", "L_refund:fix"]),
    ("keyword", "L_ask2", "statement period timezone", ["L_tz:cause", "L_tz:fix"]),
    ("keyword", "I_ask", "merged PRs approval evidence", ["I_gh_prs:fix"]),
    ("keyword", "I_ask", "shiv pyz Windows", ["I_zipapp:cause", "I_zipapp:fix"]),
    ("keyword", "I_ask", "Okta pagination", ["I_okta:cause", "I_okta:fix"]),
    ("keyword", "C_ask1", "Kafka lag partitions", ["C_kafka_lag:cause", "C_kafka_lag:fix"]),
    ("keyword", "C_ask1", "pacing PI controller", ["C_pacing:design", "C_pacing:fix"]),
    ("keyword", "C_ask1", "ristretto feature cache", ["C_ctr_feature:fix"]),
    ("keyword", "C_ask2", "TCF purpose 4", ["C_tcf:cause", "C_tcf:fix"]),
    ("keyword", "C_ask2", "Argo Rollouts canary", ["C_canary:fix"]),
    ("keyword", "C_ask1", "ClickHouse report slow", ["C_ch_report:cause", "C_ch_report:fix"]),
    ("keyword", "K_ask", "group commit fdatasync", ["K_wal:fix"]),
    ("keyword", "K_ask", "bloom filter bits per key", ["K_bloom:cause", "K_bloom:fix"]),
    ("keyword", "K_ask", "clippy needless_range_loop", ["K_clippy:fix"]),
    ("keyword", "K_ask", "criterion baseline", ["K_criterion:fix"]),
    ("keyword", "K_ask", "iterator snapshot sequence number", ["K_snapshot:fix"]),
    ("keyword", "W_ask", "aiohttp semaphore per host", ["W_sem:design", "W_sem:fix"]),
    ("keyword", "W_ask", "systemd timer", ["W_cron:fix"]),
    ("keyword", "W_ask", "UniqueViolation duplicate key", ["W_upsert:cause", "W_upsert:fix"]),

    # ---------------- paraphrase: same meaning, different words
    ("paraphrase", "L_ask1", "how did we deal with the sign-in check that kept randomly breaking on the build server",
     ["L_flaky_login:cause", "L_flaky_login:fix"]),
    ("paraphrase", "L_ask2", "why did two bills end up with the same serial during peak traffic",
     ["L_invoice_race:cause", "L_invoice_race:fix"]),
    ("paraphrase", "L_ask1", "we took a hundred times too much money from someone in Japan", ["L_jpy:cause", "L_jpy:fix"]),
    ("paraphrase", "L_ask2", "customer's name came out as blank rectangles in the generated document",
     ["L_pdf_fonts:cause", "L_pdf_fonts:fix"]),
    ("paraphrase", "L_ask1", "the nightly background job that kept dying from using too much RAM",
     ["L_celery_oom:cause", "L_celery_oom:fix"]),
    ("paraphrase", "L_ask2", "cents not adding up on a Dutch client's bill", ["L_vat_round:cause", "L_vat_round:fix"]),
    ("paraphrase", "L_ask1", "how do we avoid acting on the same payment notification more than once",
     ["L_webhook_dup:plan", "L_webhook_dup:fix"]),
    ("paraphrase", "L_ask2", "database started rejecting us once the API was scaled out", ["L_pg_pool:cause", "L_pg_pool:fix"]),
    ("paraphrase", "L_ask1", "why US Pacific clients saw last-day-of-month purchases on the following period's summary",
     ["L_tz:cause", "L_tz:fix"]),
    ("paraphrase", "L_ask2", "为什么有客户一个月被收了两次钱", ["L_recon_zh:cause", "L_recon_zh:fix"]),
    ("paraphrase", "I_ask", "which code changes went in without a second pair of eyes", ["I_gh_prs:fix"]),
    ("paraphrase", "I_ask", "导出的表格里人名显示不全", ["I_xlsx:cause", "I_xlsx:fix"]),
    ("paraphrase", "C_ask1", "advertisers burning through the whole day's money by mid-morning", ["C_pacing:design"]),
    ("paraphrase", "C_ask1", "the exchange sent us scrambled operating system info after a schema edit", ["C_proto:cause"]),
    ("paraphrase", "C_ask2", "EU traffic where people hadn't agreed to ad profiling", ["C_tcf:cause", "C_tcf:fix"]),
    ("paraphrase", "C_ask1", "爆款创意一失效，后端数据库就被同时涌进来的请求压垮", ["C_cache_breakdown:cause", "C_cache_breakdown:fix"]),
    ("paraphrase", "C_ask1", "用户反复刷到同一条投放，次数超过了设定", ["C_freqcap:cause", "C_freqcap:fix"]),
    ("paraphrase", "C_ask2", "对方平台推送审核结果时我们响应太慢", ["C_review_webhook:cause", "C_review_webhook:fix"]),
    ("paraphrase", "K_ask", "lost writes after yanking power on the virtual machine", ["K_wal:cause"]),
    ("paraphrase", "K_ask", "everything froze for a few seconds at a time while bulk loading",
     ["K_compaction:cause", "K_compaction:fix"]),
    ("paraphrase", "K_ask", "why did asking for nonexistent entries still touch storage so often", ["K_bloom:cause", "K_bloom:fix"]),
    ("paraphrase", "K_ask", "the test that would sometimes run forever on the shared runners", ["K_flaky:cause", "K_flaky:fix"]),
    ("paraphrase", "K_ask", "range reads returning rows written after they began", ["K_snapshot:cause", "K_snapshot:fix"]),
    ("paraphrase", "K_ask", "compiler complaining about using self mutably inside a loop", ["K_borrow:fix"]),
    ("paraphrase", "W_ask", "keeping the async downloader from hammering any single website", ["W_sem:design", "W_sem:fix"]),
    ("paraphrase", "W_ask", "老论坛抓下来的字都是火星文", ["W_gbk:cause", "W_gbk:fix"]),
    ("paraphrase", "W_ask", "同一件货隔天再采集就写不进库", ["W_upsert:cause", "W_upsert:fix"]),

    # ---------------- zh: Chinese questions over Chinese history
    ("zh", "C_ask1", "广告缓存击穿", ["C_cache_breakdown:cause", "C_cache_breakdown:fix"]),
    ("zh", "C_ask1", "缓存", ["C_cache_breakdown:fix", "C_ctr_feature:fix"]),
    ("zh", "C_ask1", "频次控制计数不准的原因", ["C_freqcap:cause"]),
    ("zh", "C_ask2", "新版本部署后容器一直重启", ["C_crashloop:cause", "C_crashloop:fix"]),
    ("zh", "C_ask1", "灰度发布怎么配的", ["C_canary:fix"]),
    ("zh", "C_ask2", "延迟告警规则", ["C_alert:fix"]),
    ("zh", "C_ask1", "点击日志消费延迟", ["C_kafka_lag:cause", "C_kafka_lag:fix"]),
    ("zh", "C_ask1", "广告主看到的报表数据滞后", ["C_kafka_lag:cause", "C_kafka_lag:fix"]),
    ("zh", "C_ask1", "特征缓存命中率", ["C_ctr_feature:fix"]),
    ("zh", "C_ask2", "审核回调超时", ["C_review_webhook:cause", "C_review_webhook:fix"]),
    ("zh", "C_ask1", "数据竞争", ["C_race:fix"]),
    ("zh", "L_ask1", "重复扣款", ["L_recon_zh:cause", "L_recon_zh:fix"]),
    ("zh", "L_ask1", "部署", ["L_deploy_zh:cause", "L_deploy_zh:fix"]),
    ("zh", "L_ask2", "部署完要不要跑迁移", ["L_deploy_zh:migrate"]),
    ("zh", "I_ask", "离职员工账号停用检查", ["I_leavers:fix"]),
    ("zh", "I_ask", "证据时间差了八小时", ["I_tz:cause", "I_tz:fix"]),
    ("zh", "I_ask", "审计同事要单个文件的工具", ["I_zipapp:fix"]),
    ("zh", "I_ask", "中文列宽", ["I_xlsx:cause", "I_xlsx:fix"]),
    ("zh", "I_ask", "配置校验报缺少负责人", ["I_cfg:cause", "I_cfg:fix"]),
    ("zh", "I_ask", "用户访问复核只导出了两百人", ["I_okta:cause", "I_okta:fix"]),
    ("zh", "W_ask", "爬虫被封怎么处理的", ["W_403:cause", "W_403:fix"]),
    ("zh", "W_ask", "乱码", ["W_gbk:cause", "W_gbk:fix"]),
    ("zh", "W_ask", "布隆过滤器去重", ["W_dedup:plan", "W_dedup:fix"]),
    ("zh", "W_ask", "定时任务部署", ["W_cron:fix"]),
    ("zh", "W_ask", "代理池可用率", ["W_proxy:fix"]),
    ("zh", "W_ask", "无头浏览器超时", ["W_playwright:cause", "W_playwright:fix"]),
    ("zh", "K_ask", "断电后数据库打不开", ["K_crc_zh:cause", "K_crc_zh:fix"]),

    # ---------------- cross-language: Chinese over English history, English over Chinese history
    ("cross-language", "L_ask1", "支付回调验签失败怎么修的", ["L_webhook_sig:cause", "L_webhook_sig:fix"]),
    ("cross-language", "L_ask2", "发票编号并发重复", ["L_invoice_race:cause", "L_invoice_race:fix"]),
    ("cross-language", "L_ask1", "增值税四舍五入差一分钱", ["L_vat_round:cause", "L_vat_round:fix"]),
    ("cross-language", "L_ask2", "汇率缓存", ["L_fx_cache:fix"]),
    ("cross-language", "L_ask1", "月度账单任务内存爆了", ["L_celery_oom:cause", "L_celery_oom:fix"]),
    ("cross-language", "L_ask2", "日元金额多扣了一百倍", ["L_jpy:cause", "L_jpy:fix"]),
    ("cross-language", "L_ask1", "数据库迁移出现多个分支头", ["L_alembic_heads:fix"]),
    ("cross-language", "L_ask2", "部分退款接口设计", ["L_refund:design", "L_refund:fix"]),
    ("cross-language", "L_ask1", "登录测试在CI上偶发超时", ["L_flaky_login:cause", "L_flaky_login:fix"]),
    ("cross-language", "I_ask", "合并请求的审批证据", ["I_gh_prs:fix"]),
    ("cross-language", "C_ask1", "预算匀速投放", ["C_pacing:design", "C_pacing:fix"]),
    ("cross-language", "C_ask2", "欧盟用户同意授权", ["C_tcf:cause", "C_tcf:fix"]),
    ("cross-language", "C_ask1", "协议字段编号改了导致解析错乱", ["C_proto:cause", "C_proto:fix"]),
    ("cross-language", "C_ask1", "报表查询太慢，物化视图", ["C_ch_report:cause", "C_ch_report:fix"]),
    ("cross-language", "K_ask", "写前日志落盘", ["K_wal:cause", "K_wal:fix"]),
    ("cross-language", "K_ask", "压缩导致写入停顿", ["K_compaction:cause", "K_compaction:fix"]),
    ("cross-language", "K_ask", "借用检查报错", ["K_borrow:fix"]),
    ("cross-language", "K_ask", "布隆过滤器误判率", ["K_bloom:cause", "K_bloom:fix"]),
    ("cross-language", "W_ask", "每个站点的异步并发限制", ["W_sem:design", "W_sem:fix"]),
    ("cross-language", "C_ask1", "how did we fix the cache stampede on hot creatives", ["C_cache_breakdown:fix"]),
    ("cross-language", "C_ask1", "frequency cap counting wrong", ["C_freqcap:cause", "C_freqcap:fix"]),
    ("cross-language", "C_ask1", "helm release stuck in pending-upgrade", ["C_helm:cause", "C_helm:fix"]),
    ("cross-language", "C_ask1", "consumer lag on the click log topic", ["C_kafka_lag:cause", "C_kafka_lag:fix"]),
    ("cross-language", "L_ask2", "double charge found during reconciliation", ["L_recon_zh:cause", "L_recon_zh:fix"]),
    ("cross-language", "I_ask", "terminated employees whose accounts stayed active", ["I_leavers:fix"]),
    ("cross-language", "I_ask", "column width for Chinese characters in the Excel export", ["I_xlsx:cause", "I_xlsx:fix"]),
    ("cross-language", "I_ask", "evidence timestamps off by eight hours", ["I_tz:cause", "I_tz:fix"]),
    ("cross-language", "W_ask", "garbled titles from old GBK sites", ["W_gbk:cause", "W_gbk:fix"]),
    ("cross-language", "W_ask", "scraper blocked with 403, what did we change", ["W_403:cause", "W_403:fix"]),
    ("cross-language", "W_ask", "scheduled daily crawl on the server", ["W_cron:fix"]),
    ("cross-language", "K_ask", "torn write at the WAL tail after power loss", ["K_crc_zh:cause", "K_crc_zh:fix"]),
    ("cross-language", "C_ask1", "feature cache hit rate for the CTR model", ["C_ctr_feature:fix"]),
    ("cross-language", "C_ask2", "canary rollout with 10 percent of traffic", ["C_canary:fix"]),
    ("cross-language", "L_ask1", "CPU architecture mismatch when deploying to staging", ["L_deploy_zh:cause", "L_deploy_zh:fix"]),

    # ---------------- temporal: phrased in time, gold decided by topic ("now" is Mon 2026-11-30)
    ("temporal", "L_ask2", "what did we do last week about the refund test failing after re-running migrations",
     ["L_refund_mixed:cause", "L_refund_mixed:fix"]),
    ("temporal", "L_ask1", "last week's database connection errors after scaling", ["L_pg_pool:cause", "L_pg_pool:fix"]),
    ("temporal", "L_ask1", "the webhook issue from early October where every delivery got a 400",
     ["L_webhook_sig:cause", "L_webhook_sig:fix"]),
    ("temporal", "L_ask2", "earlier this month, the yen charging bug - what was the fix?", ["L_jpy:fix"]),
    ("temporal", "L_ask1", "what did we change in October about the invoice PDFs", ["L_pdf_fonts:fix"]),
    ("temporal", "L_ask2", "about two weeks ago we fixed statements for customers in other timezones, how?",
     ["L_tz:fix"]),
    ("temporal", "L_ask1", "这个月初对账发现的重复扣款后来怎么处理的", ["L_recon_zh:fix"]),
    ("temporal", "I_ask", "上周重跑gen-itgc时间戳的问题是怎么修的", ["I_tz:fix"]),
    ("temporal", "I_ask", "what did we find in the leavers check two weeks ago", ["I_leavers:fix"]),
    ("temporal", "I_ask", "in October we added something for PRs merged without approval, what was it",
     ["I_gh_prs:fix", "I_gh_prs:exc"]),
    ("temporal", "I_ask", "上个月导出用户访问复核只有一部分人的那次", ["I_okta:cause", "I_okta:fix"]),
    ("temporal", "C_ask1", "what happened with the bid.proto change last week", ["C_proto:cause", "C_proto:fix"]),
    ("temporal", "C_ask2", "上周灰度发布是怎么配置的", ["C_canary:fix"]),
    ("temporal", "C_ask2", "上上周 helm 卡住那次是怎么恢复的", ["C_helm:fix"]),
    ("temporal", "C_ask1", "上个月初大促时 bidder 延迟飙升是怎么解决的", ["C_cache_breakdown:cause", "C_cache_breakdown:fix"]),
    ("temporal", "C_ask1", "what did we do about the slow advertiser reports ten days ago", ["C_ch_report:fix"]),
    ("temporal", "C_ask2", "mid-November, the EU consent problem legal raised", ["C_tcf:fix"]),
    ("temporal", "K_ask", "last week we set up benchmarks, how do I compare against the baseline?", ["K_criterion:fix"]),
    ("temporal", "K_ask", "the recovery fix from about a week ago, after the power-cut test", ["K_crc_zh:fix"]),
    ("temporal", "K_ask", "earlier this month there was a hanging test, what was the root cause", ["K_flaky:cause"]),
    ("temporal", "K_ask", "back in October, what did we settle on for the bloom filter", ["K_bloom:fix"]),
    ("temporal", "W_ask", "上周入库冲突是怎么改的", ["W_upsert:fix"]),
    ("temporal", "W_ask", "前几天代理池的事情", ["W_proxy:fix"]),
    ("temporal", "W_ask", "what did we change at the start of October when the shop site banned us", ["W_403:fix"]),
    ("temporal", "W_ask", "上个月 Playwright 超时最后怎么解决的", ["W_playwright:fix"]),

    # ---------------- negative: nothing in the asking project; another project (or Home) has it
    ("negative", "L_ask1", "Kafka consumer lag partitions", []),          # AdSys
    ("negative", "L_ask2", "CrashLoopBackOff", []),                        # AdSys
    ("negative", "L_ask1", "离职员工账号检查", []),                          # ITGC (nested inside Ledger's folder)
    ("negative", "L_ask2", "Okta pagination 429", []),                     # ITGC
    ("negative", "I_ask", "invoice number race condition", []),           # Ledger (parent folder)
    ("negative", "I_ask", "Stripe webhook signature", []),                # Ledger
    ("negative", "I_ask", "zsh prompt slow", []),                         # Home
    ("negative", "C_ask1", "alembic multiple heads", []),                 # Ledger
    ("negative", "C_ask1", "WAL fsync group commit", []),                 # tinykv
    ("negative", "C_ask2", "GBK 乱码", []),                                # crawler
    ("negative", "C_ask2", "ssh 跳板机配置", []),                           # Home
    ("negative", "K_ask", "缓存击穿 singleflight", []),                     # AdSys + Home
    ("negative", "K_ask", "Playwright timeout", []),                      # crawler
    ("negative", "K_ask", "Redis 频次控制", []),                            # AdSys
    ("negative", "K_ask", "aiohttp semaphore per host", []),              # crawler
    ("negative", "W_ask", "borrow checker E0502", []),                    # tinykv
    ("negative", "W_ask", "helm rollback", []),                           # AdSys
    ("negative", "W_ask", "Stripe 重复扣款", []),                           # Ledger
]


# ================================================================ build

def _lang(text: str) -> str:
    cjk = any("\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf" for ch in text)
    latin = any(ch.isascii() and ch.isalpha() for ch in text)
    if cjk and latin:
        return "mixed"
    return "zh" if cjk else "en"


def _epoch(when: str) -> float:
    return _dt.datetime.strptime(when, "%Y-%m-%d %H:%M").replace(tzinfo=UTC).timestamp()


def _sid(key: str, when: str) -> str:
    stamp = _dt.datetime.strptime(when, "%Y-%m-%d %H:%M").strftime("%Y%m%d_%H%M%S")
    return f"{stamp}_{hashlib.sha1(key.encode()).hexdigest()[:6]}"


def build() -> dict:
    sessions, ids, labels = [], {}, {}
    for s in SESSIONS:
        sid = _sid(s["key"], s["when"])
        assert s["key"] not in ids, s["key"]
        ids[s["key"]] = sid
        started = _epoch(s["when"])
        t = started + 3.0
        msgs, call_n, pending = [], 0, None
        for i, (role, content, extra, lab) in enumerate(s["msgs"]):
            m: dict = {"role": role, "content": content}
            if role == "assistant" and extra:
                call_n += 1
                pending = f"call_{hashlib.sha1(sid.encode()).hexdigest()[:8]}_{call_n}"
                name, args = extra
                m["tool_calls"] = [{"id": pending, "type": "function",
                                    "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}]
            elif role == "tool":
                m["tool_name"] = extra
                m["tool_call_id"] = pending
            m["timestamp"] = round(t, 1)
            t += {"user": 40.0, "assistant": 12.0, "tool": 2.0}[role] + (len(content) % 53)
            msgs.append(m)
            if lab:
                assert (s["key"], lab) not in labels, (s["key"], lab)
                labels[(s["key"], lab)] = i
        row: dict = {"id": sid, "source": s["source"]}
        if s["cwd"] is not None:
            row["cwd"] = s["cwd"]
        if s["root"]:
            row["git_repo_root"] = s["root"]
            row["git_branch"] = s["branch"]
        if s["title"]:
            row["title"] = s["title"]
        row["started_at"] = started
        row["archived"] = bool(s["archived"])
        row["messages"] = msgs
        sessions.append(row)

    queries, counters = [], {}
    prefix = {"identifier": "id", "keyword": "kw", "paraphrase": "para", "zh": "zh",
              "cross-language": "xl", "temporal": "time", "negative": "neg"}
    for cat, cur, text, refs in QUERIES:
        counters[cat] = counters.get(cat, 0) + 1
        gold_sessions, gold_messages = [], []
        for ref in refs:
            key, _, lab = ref.partition(":")
            if ids[key] not in gold_sessions:
                gold_sessions.append(ids[key])
            if lab:
                gold_messages.append([ids[key], labels[(key, lab)]])
        queries.append({"id": f"dev-{prefix[cat]}-{counters[cat]:02d}", "query": text,
                        "current_session": ids[cur], "gold_sessions": gold_sessions,
                        "gold_messages": gold_messages, "lang": _lang(text), "category": cat})

    return {"name": "dev", "projects": PROJECTS, "sessions": sessions, "queries": queries}


if __name__ == "__main__":
    data = build()
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(data['sessions'])} sessions, {len(data['queries'])} queries")
