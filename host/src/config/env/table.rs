//! The declared variables ([`VARIABLES`]) and the class of code-loading names
//! ([`is_code_loading`]): what [`super`] reads, and what command hooks never inherit.

/// What a variable decides, and so the rule it is read by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A place hookhost reads, writes or runs: judged by `check_path`; a refused value
    /// is ignored (the default is used), with a notice.
    Path,
    /// The project of `dispatch`: it *is* the workspace (the path checks count it as one),
    /// and its hooks still need its trust.
    Workspace,
    /// On or off, by exact values only.
    Switch,
    /// ASCII digits, within bounds; anything else is ignored with a notice.
    Number,
    /// Set by hookhost for its own children only: never read from the environment.
    Internal,
    /// Never read by hookhost (what it would choose comes from fixed places).
    Ignored,
    /// Read, deciding nothing a repository could turn against the user (log verbosity, a
    /// daemon's key, `PATH` without its relative entries).
    Passthrough,
}

/// A variable hookhost reads (or deliberately does not).
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    /// The variable's name, as the environment spells it.
    pub name: &'static str,
    /// What it decides, and so the rule it is read by.
    pub kind: Kind,
    /// The rule, as the book states it (`docs/book/src/environment.md`).
    pub rule: &'static str,
}

const fn v(name: &'static str, kind: Kind, rule: &'static str) -> Variable {
    Variable { name, kind, rule }
}

/// Every variable hookhost reads, and those it deliberately ignores. A read of a name not
/// here panics in debug builds (`read`), and the generating tests set each of them into
/// the repository (`host/tests/cli/attacks/environment.rs`).
pub const VARIABLES: &[Variable] = &[
    v(
        "HOOKHOST_MANAGED_DIR",
        Kind::Path,
        "managed policy's directory, only where the system's does not exist",
    ),
    v("HOOKHOST_HOME", Kind::Path, "the user's config directory"),
    v(
        "HOOKHOST_DATA_DIR",
        Kind::Path,
        "session state, trust store, audit log, daemon sockets",
    ),
    v(
        "HOOKHOST_AUDIT_LOG",
        Kind::Path,
        "the audit log; yields to a managed `auditLog`",
    ),
    v(
        "HOOKHOST_CACHE_DIR",
        Kind::Path,
        "the compile cache (native code)",
    ),
    v(
        "HOOKHOST_DEMO_PLUGINS",
        Kind::Path,
        "`hookhost demo` only: built example plugins",
    ),
    v(
        "HOOKHOST_DEMO_TIME_SERVER",
        Kind::Path,
        "`hookhost demo` only: the mcp-server-time program of its MCP step",
    ),
    v(
        "HOME",
        Kind::Path,
        "the home directory; else the password database's",
    ),
    v(
        "DOCKER_CONFIG",
        Kind::Path,
        "the directory of the docker `config.json` read for OCI registry credentials; else ~/.docker",
    ),
    v(
        "XDG_CONFIG_HOME",
        Kind::Path,
        "the user's config base; else ~/.config",
    ),
    v(
        "XDG_DATA_HOME",
        Kind::Path,
        "the data base; else ~/.local/share",
    ),
    v(
        "XDG_CACHE_HOME",
        Kind::Path,
        "the cache base; else ~/.cache",
    ),
    v(
        "TMPDIR",
        Kind::Path,
        "where a library host without a data directory makes its private session store; else /tmp",
    ),
    v(
        "XDG_RUNTIME_DIR",
        Kind::Path,
        "`hookhost serve`'s default socket directory",
    ),
    v(
        "CLAUDE_CONFIG_DIR",
        Kind::Path,
        "`hookhost install`: Claude Code's settings directory",
    ),
    v(
        "CODEX_HOME",
        Kind::Path,
        "`hookhost install`: Codex's settings directory",
    ),
    v(
        "COPILOT_HOME",
        Kind::Path,
        "`hookhost install --copilot`: Copilot CLI's directory (hooks/hookhost.json); else ~/.copilot",
    ),
    v(
        "RUSTC",
        Kind::Path,
        "`hookhost demo` only: the compiler that builds the examples",
    ),
    v(
        "CARGO",
        Kind::Path,
        "`hookhost demo` only: cargo, to build the examples",
    ),
    v(
        "HOOKHOST_PROJECT_DIR",
        Kind::Workspace,
        "the project of `dispatch` without `--project`",
    ),
    v(
        "CLAUDE_PROJECT_DIR",
        Kind::Workspace,
        "the project of `dispatch` without `--project`",
    ),
    v(
        "HOOKHOST_TRUST_WORKSPACE",
        Kind::Switch,
        "exactly `1`; managed policy may forbid it",
    ),
    v(
        "HOOKHOST_DISPATCH_DAEMON",
        Kind::Switch,
        "`off` (or anything but `auto`): no daemon; it can only turn the daemon off",
    ),
    v(
        "HOOKHOST_STOP_BLOCK_CAP",
        Kind::Number,
        "digits; yields to a managed `stopBlockCap`",
    ),
    v(
        "HOOKHOST_DEPTH",
        Kind::Number,
        "digits, 0 to 1000000: how deep in hooks this hookhost runs (it hands the processes it \
         starts its own + 1); anything else counts as past `maxHookDepth`",
    ),
    v("HOOKHOST_MAX_PLUGIN_MB", Kind::Number, "digits, 1 to 4096"),
    v(
        "HOOKHOST_DISPATCH_DAEMON_IDLE_SECS",
        Kind::Number,
        "digits, 1 to 86400",
    ),
    v(
        "HOOKHOST_CONNECTION_IDLE_SECS",
        Kind::Number,
        "digits, 1 to 86400: a daemon's idle connections are closed after it",
    ),
    v(
        "HOOKHOST_DISPATCH_DAEMON_SOCKET",
        Kind::Internal,
        "never read: a daemon gets its socket as its stdin",
    ),
    v(
        "HOOKHOST_SESSION_ID",
        Kind::Internal,
        "set by hookhost for each command hook",
    ),
    v(
        "HOOKHOST_EVENT",
        Kind::Internal,
        "set by hookhost for each command hook",
    ),
    v(
        "HOOKHOST_TOOL_NAME",
        Kind::Internal,
        "set by hookhost for a command hook with `contextEnv`",
    ),
    v(
        "HOOKHOST_TOOL_INPUT",
        Kind::Internal,
        "set by hookhost for a command hook with `contextEnv`",
    ),
    v(
        "HOOKHOST_TOOL_RESULT",
        Kind::Internal,
        "set by hookhost for a command hook with `contextEnv`",
    ),
    v(
        "HOOKHOST_TOOL_NAME_TRUNCATED",
        Kind::Internal,
        "set by hookhost when `HOOKHOST_TOOL_NAME` was cut",
    ),
    v(
        "HOOKHOST_TOOL_INPUT_TRUNCATED",
        Kind::Internal,
        "set by hookhost when `HOOKHOST_TOOL_INPUT` was cut",
    ),
    v(
        "HOOKHOST_TOOL_RESULT_TRUNCATED",
        Kind::Internal,
        "set by hookhost when `HOOKHOST_TOOL_RESULT` was cut",
    ),
    v(
        "HOOKHOST_CWD",
        Kind::Internal,
        "set by hookhost for a command hook with `contextEnv`",
    ),
    v(
        "HOOKHOST_CWD_TRUNCATED",
        Kind::Internal,
        "set by hookhost when `HOOKHOST_CWD` was cut",
    ),
    v(
        "HOOKHOST_ENV_FILE",
        Kind::Internal,
        "set by hookhost for a command hook that may write one",
    ),
    v(
        "CLAUDE_CODE_SESSION_ID",
        Kind::Internal,
        "set by hookhost for each command hook",
    ),
    v(
        "CLAUDE_ENV_FILE",
        Kind::Path,
        "Claude Code's: hooks get hookhost's own env file, and what they write to it is appended to this one",
    ),
    v(
        "SSL_CERT_FILE",
        Kind::Ignored,
        "HTTP hooks trust the system's store at its fixed places and the Mozilla roots",
    ),
    v("SSL_CERT_DIR", Kind::Ignored, "as SSL_CERT_FILE"),
    v("HTTPS_PROXY", Kind::Ignored, "HTTP hooks connect directly"),
    v("HTTP_PROXY", Kind::Ignored, "HTTP hooks connect directly"),
    v("ALL_PROXY", Kind::Ignored, "HTTP hooks connect directly"),
    v("NO_PROXY", Kind::Ignored, "HTTP hooks connect directly"),
    v("https_proxy", Kind::Ignored, "HTTP hooks connect directly"),
    v("http_proxy", Kind::Ignored, "HTTP hooks connect directly"),
    v("all_proxy", Kind::Ignored, "HTTP hooks connect directly"),
    v(
        "BASH_ENV",
        Kind::Ignored,
        "code-loading: never passed to command hooks",
    ),
    v(
        "ENV",
        Kind::Ignored,
        "code-loading: never passed to command hooks",
    ),
    v(
        "LD_PRELOAD",
        Kind::Ignored,
        "code-loading: never passed to command hooks",
    ),
    v(
        "LD_LIBRARY_PATH",
        Kind::Ignored,
        "code-loading: never passed to command hooks",
    ),
    v(
        "RUST_MIN_STACK",
        Kind::Ignored,
        "removed at start: threads' stacks are not the environment's",
    ),
    v(
        "ANTHROPIC_API_KEY",
        Kind::Passthrough,
        "the key of prompt hooks on Anthropic (default `apiKeyEnv`); sent only to an endpoint \
         that passes the URL checks, never logged",
    ),
    v(
        "OPENAI_API_KEY",
        Kind::Passthrough,
        "the key of prompt hooks on an OpenAI-compatible endpoint (default `apiKeyEnv`)",
    ),
    v(
        "ANTHROPIC_BASE_URL",
        Kind::Passthrough,
        "Anthropic's endpoint for prompt hooks: honoured for a loopback host, or one that \
         `allowedHttpHookUrls` or `ceilings.models.hosts` names",
    ),
    v(
        "OPENAI_BASE_URL",
        Kind::Passthrough,
        "an OpenAI-compatible endpoint for prompt hooks: as ANTHROPIC_BASE_URL",
    ),
    v("HOOKHOST_LOG", Kind::Passthrough, "log verbosity on stderr"),
    v(
        "HOOKHOST_REGISTRY_AUTH",
        Kind::Passthrough,
        "`registry=user:password`: credentials for that one OCI registry only",
    ),
    v(
        "RUST_BACKTRACE",
        Kind::Passthrough,
        "a backtrace after an internal error",
    ),
    v(
        "LISTEN_PID",
        Kind::Number,
        "`hookhost serve`: socket activation; the descriptors of LISTEN_FDS are this \
         process's only when it names this process",
    ),
    v(
        "LISTEN_FDS",
        Kind::Number,
        "`hookhost serve`: socket activation; 1 listens on the inherited descriptor 3",
    ),
    v(
        "TRACEPARENT",
        Kind::Passthrough,
        "the caller's W3C trace context: the parent of the dispatch's span; forwarded to \
         a dispatch daemon per request (never part of its key)",
    ),
    v(
        "TRACESTATE",
        Kind::Passthrough,
        "with TRACEPARENT: carried on the dispatch's spans",
    ),
    v(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        Kind::Passthrough,
        "the OTLP/HTTP collector (`/v1/traces`, `/v1/metrics` appended): honoured for a \
         loopback host, or one the user's or managed `allowedHttpHookUrls` admits; a \
         managed `telemetry.endpoint` wins",
    ),
    v(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        Kind::Passthrough,
        "the traces URL, as is: the same rule as OTEL_EXPORTER_OTLP_ENDPOINT",
    ),
    v(
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        Kind::Passthrough,
        "the metrics URL, as is: the same rule as OTEL_EXPORTER_OTLP_ENDPOINT",
    ),
    v(
        "OTEL_EXPORTER_OTLP_HEADERS",
        Kind::Passthrough,
        "headers of every export (`k=v,…`, values URL-encoded); a managed \
         `telemetry.headers` key wins over the same name here",
    ),
    v(
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        Kind::Number,
        "milliseconds one export may take (1 to 60000; default 5000)",
    ),
    v(
        "OTEL_SERVICE_NAME",
        Kind::Passthrough,
        "the `service.name` of the exported resource (default `hookhost`)",
    ),
    v(
        "OTEL_RESOURCE_ATTRIBUTES",
        Kind::Passthrough,
        "more resource attributes (`k=v,…`)",
    ),
    v(
        "OTEL_SDK_DISABLED",
        Kind::Passthrough,
        "`true`: no export, unless managed policy sets `telemetry.endpoint`",
    ),
    v(
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        Kind::Ignored,
        "per-signal headers are not supported: OTEL_EXPORTER_OTLP_HEADERS",
    ),
    v(
        "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
        Kind::Ignored,
        "per-signal headers are not supported: OTEL_EXPORTER_OTLP_HEADERS",
    ),
    v(
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        Kind::Ignored,
        "always `http/protobuf` (no gRPC)",
    ),
    v(
        "OTEL_EXPORTER_OTLP_COMPRESSION",
        Kind::Ignored,
        "always gzip",
    ),
    v(
        "OTEL_EXPORTER_OTLP_CERTIFICATE",
        Kind::Ignored,
        "TLS roots never come from the environment (managed `httpHookCaFile`)",
    ),
    v(
        "OTEL_TRACES_SAMPLER",
        Kind::Ignored,
        "every dispatch is a span, unless the caller's TRACEPARENT is not sampled",
    ),
    v(
        "OTEL_BSP_MAX_QUEUE_SIZE",
        Kind::Ignored,
        "the export queue is fixed (bounded; drops are counted and said)",
    ),
    v(
        "OTEL_METRIC_EXPORT_INTERVAL",
        Kind::Ignored,
        "metrics are exported every 30 s and when a one-shot dispatch exits",
    ),
    v(
        "PATH",
        Kind::Passthrough,
        "programs of command hooks; relative entries dropped",
    ),
];

/// Variables whose value a shell later runs as code (prompts, start-up files, option
/// sets); with [`SHELL_FUNCTION_PREFIX`], the one list of them: [`is_code_loading`] keeps
/// them from command hooks, and the `if` filter's shell analysis
/// (`crate::matcher::shell`) treats an assignment to one as code it cannot see.
pub const SHELL_CODE_VARIABLES: &[&str] = &[
    "ENV",
    "BASH_ENV",
    "PS0",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "PROMPT_COMMAND",
    "SHELLOPTS",
    "BASHOPTS",
    "ZDOTDIR",
];

/// The prefix of exported shell functions (`BASH_FUNC_name%%`), which a shell defines
/// (and so runs) at start-up.
pub const SHELL_FUNCTION_PREFIX: &str = "BASH_FUNC_";

/// Whether `name` is one of [`SHELL_CODE_VARIABLES`] or an exported shell function
/// (exact names, as a shell spells them).
pub fn is_shell_code_variable(name: &str) -> bool {
    SHELL_CODE_VARIABLES.contains(&name) || name.starts_with(SHELL_FUNCTION_PREFIX)
}

/// Whether a variable named `name` can make a shell, the dynamic loader or an interpreter
/// load or run code when a command hook starts. A rule over classes of names, so that a
/// new interpreter's `…OPTIONS` or `…PATH` is covered without being named (compared
/// without regard to case):
///
/// - a name with ASCII punctuation other than `_` (`BASH_FUNC_f%%`, `f()`): exported
///   shell functions and anything a shell would not set (other bytes pass: a name that
///   is not UTF-8 reaches hooks unchanged);
/// - the dynamic loader's and the C library's: `LD_*`, `DYLD_*`, `GLIBC_*`, `MALLOC_*`;
/// - shell functions and start-up: `BASH_FUNC_*`, `ENV`, `BASH_ENV`, `PS0`…`PS4`,
///   `PROMPT_COMMAND`, `SHELLOPTS`, `BASHOPTS`, `IFS`, `ZDOTDIR`, `GLOBIGNORE`,
///   `EXECIGNORE`, `INPUTRC`;
/// - interpreters' start-up: `PYTHON*`, `PERL*`, `RUBY*`, and every name ending in `OPT`,
///   `OPTS`, `OPTIONS`, `STARTUP`, `LIB`, `_INIT`, `_HOOKS`, `_CONF` or `PATH` (except
///   `PATH` itself, which hookhost sets: absolute entries only);
/// - programs that run programs: `GIT_*`, `NPM_CONFIG_*`, names ending in `_COMMAND` or
///   `ASKPASS`, `EDITOR`, `VISUAL`, `PAGER`.
///
/// A hook that needs one sets it in its own command (`PYTHONPATH=lib python3 hook.py`).
pub fn is_code_loading(name: &[u8]) -> bool {
    let upper = name.to_ascii_uppercase();
    let n = upper.as_slice();
    if n.is_empty() || n.iter().any(|b| b.is_ascii_punctuation() && *b != b'_') {
        return true;
    }
    const PREFIXES: &[&str] = &[
        "LD_",
        "DYLD_",
        "GLIBC_",
        "MALLOC_",
        SHELL_FUNCTION_PREFIX,
        "PYTHON",
        "PERL",
        "RUBY",
        "GIT_",
        "NPM_CONFIG_",
    ];
    const SUFFIXES: &[&str] = &[
        "OPT",
        "OPTS",
        "OPTIONS",
        "STARTUP",
        "LIB",
        "INIT",
        "_HOOKS",
        "_CONF",
        "PATH",
        "_COMMAND",
        "ASKPASS",
        // Programs a hook runs that run a command or load a module a variable names
        // (`LESSOPEN`, `VIMINIT`/`EXINIT`, `MANPAGER`, `GIT_EDITOR`, `PHPRC`,
        // `OPENSSL_ENGINES`/`_MODULES`, `GTK_MODULES`, `KUBECONFIG`'s exec plugins,
        // `AWS_CONFIG_FILE`'s `credential_process`).
        "OPEN",
        "CLOSE",
        "PAGER",
        "EDITOR",
        "RC",
        "ENGINES",
        "MODULES",
        "CONFIG",
        "CONFIG_FILE",
    ];
    // Besides the shell's own code variables ([`SHELL_CODE_VARIABLES`]).
    const NAMES: &[&str] = &[
        "IFS",
        "GLOBIGNORE",
        "EXECIGNORE",
        "INPUTRC",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "BROWSER",
    ];
    if n == b"PATH" {
        return false;
    }
    PREFIXES.iter().any(|p| n.starts_with(p.as_bytes()))
        || SUFFIXES.iter().any(|s| n.ends_with(s.as_bytes()))
        || NAMES
            .iter()
            .chain(SHELL_CODE_VARIABLES)
            .any(|x| n == x.as_bytes())
}
