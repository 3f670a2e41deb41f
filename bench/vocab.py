"""The words the synthetic corpus is made of, and the projects that own them.

Every project has its own domain terms (an English phrase and its Chinese
counterpart); identifiers, file paths and commands are derived from those terms
the way a codebase derives them (``retry policy`` → ``retry_policy``,
``RetryPolicy``, ``src/payments/retry_policy.py``). So a query drawn from this
vocabulary has a plausible right answer in one project and is noise in the
others — which is what project-scoped search is about.

Pure data plus a few derivations; no I/O and no randomness here.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Term:
    en: str
    zh: str

    @property
    def snake(self) -> str:
        return "_".join(self.en.replace("-", " ").replace(".", " ").split()).lower()

    @property
    def camel(self) -> str:
        return "".join(w[:1].upper() + w[1:] for w in self.en.replace("-", " ").replace(".", " ").split())

    @property
    def lower_camel(self) -> str:
        camel = self.camel
        return camel[:1].lower() + camel[1:]


@dataclass(frozen=True)
class ProjectSpec:
    """One project of the synthetic machine.

    ``kind`` is how Hermes knows it: ``explicit`` (in projects.db with
    ``folders``), ``auto`` (a git repo or a plain folder) or ``home`` (no project).
    Paths are relative to the corpus's work folder.
    """

    key: str
    name: str
    kind: str
    share: float
    zh_share: float
    lang: str
    terms: tuple[Term, ...]
    folders: tuple[str, ...] = ()
    repos: tuple[str, ...] = ()
    worktree: tuple[str, str, str] | None = None  # (repo, worktree path, branch)
    subdirs: tuple[str, ...] = ()
    extras: tuple[str, ...] = field(default_factory=tuple)

    @property
    def package(self) -> str:
        return self.key.replace("-", "_")

    def file_for(self, term: Term) -> str:
        s, pkg = term.snake, self.package
        return {
            "python": f"src/{pkg}/{s}.py",
            "go": f"internal/{s.replace('_', '')}/{s}.go",
            "rust": f"src/{s}.rs",
            "ts": f"src/{term.lower_camel}.ts",
            "terraform": f"modules/{s.replace('_', '-')}/main.tf",
            "shell": f"bin/{s.replace('_', '-')}.sh",
            "md": f"{s.replace('_', '-')}.md",
        }[self.lang]

    def test_for(self, term: Term) -> str:
        s = term.snake
        return {
            "python": f"tests/test_{s}.py",
            "go": f"internal/{s.replace('_', '')}/{s}_test.go",
            "rust": f"tests/{s}.rs",
            "ts": f"src/__tests__/{term.lower_camel}.test.ts",
            "terraform": f"tests/{s.replace('_', '-')}.tftest.hcl",
            "shell": f"tests/{s.replace('_', '-')}.bats",
            "md": f"{s.replace('_', '-')}.md",
        }[self.lang]

    def function_for(self, verb: str, term: Term) -> str:
        if self.lang in ("go", "ts"):
            return verb + term.camel
        return f"{verb}_{term.snake}"

    def test_command(self, term: Term) -> str:
        return {
            "python": f"pytest -x {self.test_for(term)}",
            "go": f"go test ./internal/{term.snake.replace('_', '')}/... -run Test{term.camel}",
            "rust": f"cargo test {term.snake}",
            "ts": f"npx jest {self.test_for(term)}",
            "terraform": "terraform plan -out=tfplan",
            "shell": f"bats {self.test_for(term)}",
            "md": "make html",
        }[self.lang]


def T(en: str, zh: str) -> Term:  # a literal constructor: reads like data
    return Term(en, zh)


PROJECTS: tuple[ProjectSpec, ...] = (
    ProjectSpec(
        key="payments", name="Payments Platform", kind="explicit", share=0.40, zh_share=0.25, lang="python",
        folders=("payments-api", "payments-infra"), repos=("payments-api", "payments-infra"),
        subdirs=("payments-api/src", "payments-api/tests", "payments-api/migrations", "payments-infra/deploy"),
        extras=("settings-prod.yaml", "STRIPE_WEBHOOK_SECRET", "docker-compose.override.yml", "alembic.ini",
                "PAYMENTS_DB_URL", "celery_worker.py", "requirements-lock.txt"),
        terms=(
            T("invoice", "发票"), T("refund", "退款"), T("webhook signature", "回调签名"),
            T("retry policy", "重试策略"), T("idempotency key", "幂等键"), T("ledger entry", "账目分录"),
            T("currency conversion", "汇率换算"), T("settlement batch", "结算批次"), T("chargeback", "拒付"),
            T("tax rate", "税率"), T("payout schedule", "打款计划"), T("card token", "卡片令牌"),
            T("fraud score", "风控评分"), T("subscription renewal", "订阅续费"), T("receipt email", "收据邮件"),
            T("rate limiter", "限流器"), T("audit log", "审计日志"), T("reconciliation job", "对账任务"),
            T("dunning", "催缴"), T("price tier", "价格档位"), T("billing cycle", "账单周期"),
            T("coupon code", "优惠码"),
        ),
    ),
    ProjectSpec(
        key="adsys", name="AdSys 广告系统", kind="explicit", share=0.12, zh_share=0.8, lang="go",
        folders=("adsys", "adsys-infra"), repos=("adsys",), subdirs=("adsys/internal", "adsys/cmd", "adsys-infra"),
        extras=("ad-server.toml", "KAFKA_BROKERS", "bidder.proto", "Makefile", "go.sum"),
        terms=(
            T("ad click", "广告点击"), T("click-through rate", "点击率"), T("bid price", "出价"),
            T("budget pacing", "预算平滑"), T("frequency cap", "频控"), T("creative review", "素材审核"),
            T("audience segment", "人群包"), T("conversion tracking", "转化追踪"), T("ad slot", "广告位"),
            T("cost per mille", "千次展示成本"), T("dedup window", "去重窗口"), T("traffic split", "流量分桶"),
            T("landing page", "落地页"), T("impression log", "曝光日志"),
        ),
    ),
    ProjectSpec(
        key="tinykv", name="tinykv", kind="auto", share=0.10, zh_share=0.1, lang="rust",
        repos=("oss/tinykv",), worktree=("oss/tinykv", "oss/tinykv-compaction", "feat/compaction"),
        subdirs=("oss/tinykv/src", "oss/tinykv/tests", "oss/tinykv-compaction/src"),
        extras=("Cargo.toml", "RUST_LOG", "tinykv-config.toml", "clippy.toml"),
        terms=(
            T("write-ahead log", "预写日志"), T("compaction", "压缩合并"), T("bloom filter", "布隆过滤器"),
            T("memtable", "内存表"), T("sstable", "有序表文件"), T("raft election", "选主"),
            T("snapshot", "快照"), T("range scan", "范围扫描"), T("lock manager", "锁管理器"),
            T("checksum", "校验和"), T("block cache", "块缓存"),
        ),
    ),
    ProjectSpec(
        key="crawler", name="crawler", kind="auto", share=0.08, zh_share=0.8, lang="python",
        repos=("crawler",), subdirs=("crawler/spiders", "crawler/tests"),
        extras=("scrapy.cfg", "PROXY_POOL_URL", "user_agents.txt"),
        terms=(
            T("robots parser", "robots解析"), T("proxy pool", "代理池"), T("captcha solver", "验证码识别"),
            T("page dedup", "网页去重"), T("sitemap", "站点地图"), T("url frontier", "待抓队列"),
            T("html parser", "网页解析"), T("cookie jar", "Cookie池"), T("crawl delay", "抓取间隔"),
        ),
    ),
    ProjectSpec(
        key="ml-pipeline", name="ml-pipeline", kind="auto", share=0.07, zh_share=0.3, lang="python",
        repos=("ml-pipeline",), subdirs=("ml-pipeline/train", "ml-pipeline/notebooks"),
        extras=("config/train.yaml", "WANDB_PROJECT", "requirements-gpu.txt"),
        terms=(
            T("feature store", "特征库"), T("training loop", "训练循环"), T("learning rate", "学习率"),
            T("data loader", "数据加载"), T("model checkpoint", "模型检查点"), T("embedding table", "向量表"),
            T("eval metric", "评估指标"), T("label noise", "标签噪声"), T("gradient clipping", "梯度裁剪"),
            T("batch size", "批大小"),
        ),
    ),
    ProjectSpec(
        key="mobile", name="Mobile App", kind="explicit", share=0.06, zh_share=0.3, lang="ts",
        folders=("mobile/ios", "mobile/android"), subdirs=("mobile/ios/App", "mobile/android/app"),
        extras=("app.json", "Podfile.lock", "build.gradle"),
        terms=(
            T("push notification", "推送通知"), T("deep link", "深度链接"), T("offline cache", "离线缓存"),
            T("login screen", "登录页"), T("dark mode", "深色模式"), T("in-app purchase", "应用内购买"),
            T("crash report", "崩溃报告"), T("onboarding flow", "新手引导"),
        ),
    ),
    ProjectSpec(
        key="docs-site", name="docs-site", kind="auto", share=0.04, zh_share=0.3, lang="ts",
        repos=("docs-site",), subdirs=("docs-site/content", "docs-site/theme"),
        extras=("docusaurus.config.js", "sidebars.js", "ALGOLIA_APP_ID"),
        terms=(
            T("search index", "搜索索引"), T("sidebar navigation", "侧边栏导航"), T("code sample", "示例代码"),
            T("versioned docs", "多版本文档"), T("broken link", "死链"), T("translation memory", "翻译记忆"),
            T("build cache", "构建缓存"),
        ),
    ),
    ProjectSpec(
        key="infra", name="Infra Terraform", kind="explicit", share=0.04, zh_share=0.2, lang="terraform",
        folders=("infra",), repos=("infra",), subdirs=("infra/modules", "infra/envs/prod"),
        extras=("terraform.tfvars", "AWS_PROFILE", "backend.hcl"),
        terms=(
            T("load balancer", "负载均衡"), T("dns record", "域名解析记录"), T("vpc peering", "VPC对等连接"),
            T("iam role", "IAM角色"), T("autoscaling group", "自动扩缩容组"), T("state lock", "状态锁"),
        ),
    ),
    ProjectSpec(
        key="scripts", name="scripts", kind="auto", share=0.02, zh_share=0.2, lang="shell",
        subdirs=("scripts",), extras=("crontab.txt", "BACKUP_BUCKET"),
        terms=(T("backup script", "备份脚本"), T("cron schedule", "定时任务"), T("disk usage", "磁盘占用"),
               T("log rotation", "日志轮转")),
    ),
    ProjectSpec(
        key="notes", name="notes", kind="auto", share=0.02, zh_share=0.5, lang="md",
        subdirs=("notes",), extras=("todo.md",),
        terms=(T("meeting notes", "会议纪要"), T("weekly report", "周报"), T("reading list", "阅读清单")),
    ),
    ProjectSpec(
        key="home", name="Home", kind="home", share=0.05, zh_share=0.3, lang="shell",
        extras=(".bashrc", ".gitconfig"),
        terms=(T("python packaging", "Python打包"), T("git rebase", "变基"), T("shell alias", "命令别名"),
               T("regular expression", "正则表达式"), T("time zone", "时区"), T("ssh tunnel", "SSH隧道")),
    ),
)

LARGE_PROJECT = "payments"
SMALL_PROJECT = "docs-site"

ACTIONS = (T("fix", "修复"), T("refactor", "重构"), T("add tests for", "补测试"), T("speed up", "优化"),
           T("migrate", "迁移"), T("document", "写文档"), T("review", "审查"), T("debug", "排查"))
PROBLEMS = (
    T("timeout", "超时"), T("race condition", "竞态条件"), T("memory leak", "内存泄漏"), T("deadlock", "死锁"),
    T("flaky test", "测试不稳定"), T("off-by-one error", "边界错误"), T("null pointer", "空指针"),
    T("wrong rounding", "舍入错误"), T("encoding error", "编码错误"), T("stale cache", "缓存过期"),
    T("slow query", "慢查询"), T("permission denied", "权限不足"), T("connection reset", "连接被重置"),
    T("duplicate rows", "重复数据"),
)
STATES = (T("empty", "为空"), T("expired", "过期"), T("very large", "特别大"), T("missing", "缺失"),
          T("concurrent", "并发"), T("retried", "重试"))
VERBS = ("compute", "load", "validate", "apply", "parse", "build", "flush", "reconcile", "resolve", "emit")
ERRORS = {
    "python": ("TimeoutError", "KeyError", "ValueError", "IntegrityError", "AssertionError", "UnicodeDecodeError"),
    "go": ("context deadline exceeded", "nil pointer dereference", "index out of range", "connection refused"),
    "rust": ("thread 'main' panicked", "borrow of moved value", "called `Option::unwrap()` on a `None` value"),
    "ts": ("TypeError: Cannot read properties of undefined", "ReferenceError", "Unhandled promise rejection"),
    "terraform": ("Error acquiring the state lock", "InvalidParameterValue", "AccessDenied"),
    "shell": ("No space left on device", "command not found", "Permission denied"),
    "md": ("broken reference", "missing front matter"),
}

EN_FILLER = (
    "Let me check the logs first.", "That matches what we saw in staging yesterday.",
    "I will keep the change small so it is easy to review.", "The tests were green before this change.",
    "This only shows up under load, so a unit test alone will not catch it.",
    "I think we should write this down in the changelog.", "Nothing else depends on this path.",
    "We can revisit the design once the release is out.", "I ran it twice to be sure it is not flaky.",
    "The old behaviour was never documented, so nobody should rely on it.",
    "Please also update the README when you are done.", "The numbers look reasonable now.",
)
ZH_FILLER = (
    "我先看一下日志。", "这个和昨天在测试环境看到的现象一样。", "改动尽量小一点，方便评审。",
    "改之前测试都是通过的。", "这个问题只在高并发下出现，单测可能覆盖不到。", "这个要记到变更日志里。",
    "其他地方没有依赖这段代码。", "等版本发布之后再重新设计一下。", "我跑了两遍，确认不是偶发的。",
    "旧的行为从来没有写进文档。", "改完顺便更新一下说明文档。", "现在的数字看起来正常了。",
)
