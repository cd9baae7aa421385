//! Capability ceilings of managed policy: the most that a hook from any other source may
//! be granted (directories and their modes, env var names, HTTP hosts, fuel, memory,
//! time), and which handler types each non-managed source may use.
//!
//! A grant above a ceiling refuses the hook at load, with a message naming the grant and
//! the ceiling. A limit the hook leaves at its default is lowered to the ceiling instead
//! (the default is not something the hook asked for).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::capability::{HostPattern, expand_path};
use super::limits::{DEFAULT_FUEL, DEFAULT_MEMORY_BYTES};
use super::spec::{HandlerSpec, Hook};
use crate::config::SourceKind;
use crate::config::schema::{DirMode, HandlerType, RawCeilings, RawHandler, RawHandlerTypes};

/// The ceilings of managed policy, validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ceilings {
    dirs: Option<Vec<(String, DirMode)>>,
    env: Option<Vec<String>>,
    http: Option<Vec<HostPattern>>,
    fuel: Option<u64>,
    memory_bytes: Option<u64>,
    timeout: Option<f64>,
    handler_types: RawHandlerTypes,
    models: Option<super::models::ModelCeiling>,
    mcp_servers: Option<Vec<String>>,
    registries: Option<Vec<String>>,
    oci_tags: bool,
}

fn mode_name(mode: DirMode) -> &'static str {
    match mode {
        DirMode::ReadOnly => "ro",
        DirMode::ReadWrite => "rw",
    }
}

impl Ceilings {
    /// Whether `ceilings.mcpServers` lets a hook outside managed policy call `server`
    /// (known as `name`): an entry equal to the name, the stdio command or the URL.
    ///
    /// # Errors
    ///
    /// Why not, naming the ceiling.
    pub fn admits_mcp_server(
        &self,
        name: &str,
        server: &super::mcp::McpServer,
    ) -> Result<(), String> {
        let target = match server {
            super::mcp::McpServer::Stdio { command, .. } => command,
            super::mcp::McpServer::Http { url } => url,
        };
        self.admits_mcp(name, Some(target))
    }

    /// Whether `ceilings.mcpServers` lets a hook outside managed policy call the
    /// embedder's server `name`: an entry equal to the name (it has no command or URL).
    ///
    /// # Errors
    ///
    /// Why not, naming the ceiling.
    pub fn admits_embedder_mcp_server(&self, name: &str) -> Result<(), String> {
        self.admits_mcp(name, None)
    }

    fn admits_mcp(&self, name: &str, target: Option<&str>) -> Result<(), String> {
        let Some(allowed) = &self.mcp_servers else {
            return Ok(());
        };
        if allowed
            .iter()
            .any(|a| a == name || Some(a.as_str()) == target)
        {
            Ok(())
        } else {
            let target = target.unwrap_or("the embedder's");
            Err(format!(
                "managed `ceilings.mcpServers` {allowed:?} does not admit server `{name}` ({target})"
            ))
        }
    }

    /// Validates the ceilings. Invalid entries are returned as `(JSON path, message)`;
    /// an invalid value is the strictest one, never absent: an invalid list entry is left
    /// out (the ceiling only gets lower), an invalid timeout (0, negative) is 0 s, which
    /// refuses every capped hook.
    pub fn new(raw: &RawCeilings) -> (Ceilings, Vec<(String, String)>) {
        let mut errors = Vec::new();
        let dirs = raw.dirs.as_ref().map(|dirs| {
            dirs.iter()
                .enumerate()
                .filter_map(|(i, d)| {
                    match expand_path(&d.path, Path::new("/workspace"), Some(Path::new("/home"))) {
                        Ok(_) => Some((d.path.clone(), d.mode)),
                        Err(e) => {
                            errors.push((format!("$.ceilings.dirs[{i}].path"), e));
                            None
                        }
                    }
                })
                .collect()
        });
        let http = raw.http.as_ref().map(|list| {
            list.iter()
                .enumerate()
                .filter_map(|(i, p)| match HostPattern::parse(p) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        errors.push((format!("$.ceilings.http[{i}]"), e));
                        None
                    }
                })
                .collect()
        });
        let timeout = match raw.timeout {
            Some(t) if !(t.is_finite() && t > 0.0) => {
                errors.push((
                    "$.ceilings.timeout".into(),
                    format!(
                        "must be a positive number of seconds, found {t}; the strictest \
                         ceiling applies (no hook outside managed policy may run)"
                    ),
                ));
                Some(0.0)
            }
            t => t,
        };
        let ceilings = Ceilings {
            dirs,
            env: raw.env.clone(),
            http,
            fuel: raw.fuel,
            memory_bytes: raw
                .memory_bytes
                .or(raw.memory_mb.map(|mb| mb.saturating_mul(1 << 20))),
            timeout,
            handler_types: raw.handler_types.clone().unwrap_or_default(),
            models: raw
                .models
                .as_ref()
                .map(|m| super::models::ModelCeiling::new(m, &mut errors)),
            mcp_servers: raw.mcp_servers.clone(),
            registries: raw.registries.as_ref().map(|list| {
                list.iter()
                    .enumerate()
                    .filter_map(|(i, entry)| {
                        match super::oci::check_registry_entry(&entry.to_ascii_lowercase()) {
                            Ok(()) => Some(entry.clone()),
                            Err(e) => {
                                errors.push((format!("$.ceilings.registries[{i}]"), e));
                                None
                            }
                        }
                    })
                    .collect()
            }),
            oci_tags: raw.oci_tags == Some(true),
        };
        (ceilings, errors)
    }

    /// Whether managed `ceilings.ociTags` lets an `oci://` plugin be named by its tag
    /// alone.
    pub fn oci_tags(&self) -> bool {
        self.oci_tags
    }

    /// Whether `ceilings.registries` lets a hook outside managed policy take its plugin
    /// from `reference`'s registry.
    ///
    /// # Errors
    ///
    /// Why not, naming the ceiling and the registry.
    pub fn admits_registry(&self, reference: &super::oci::OciRef) -> Result<(), String> {
        match &self.registries {
            Some(list) if !reference.registry_within(list) => Err(format!(
                "`plugin`: the registry `{}` of `{reference}` is not in the managed ceiling \
                 `ceilings.registries`: [{}]",
                reference.registry,
                list.join(", ")
            )),
            _ => Ok(()),
        }
    }

    /// `ceilings.models`, when managed policy sets it.
    pub fn models(&self) -> Option<&super::models::ModelCeiling> {
        self.models.as_ref()
    }

    /// Why a hook of type `kind` from `source` may not run, if managed policy restricts
    /// the handler types of that source and `kind` is not among them.
    pub fn refuses_type(&self, source: SourceKind, kind: &str) -> Option<String> {
        let (allowed, key) = match source {
            SourceKind::Cli => (&self.handler_types.cli, "cli"),
            SourceKind::Local => (&self.handler_types.local, "local"),
            SourceKind::Project => (&self.handler_types.project, "project"),
            SourceKind::User => (&self.handler_types.user, "user"),
            SourceKind::Managed | SourceKind::Embedded => return None,
        };
        let allowed = allowed.as_ref()?;
        if allowed.iter().any(|t| t.as_str() == kind) {
            return None;
        }
        let list: Vec<&str> = allowed.iter().map(|t| HandlerType::as_str(*t)).collect();
        Some(format!(
            "managed policy does not allow `{kind}` hooks from {key} sources \
             (`ceilings.handlerTypes.{key}`: {})",
            if list.is_empty() {
                "none".to_string()
            } else {
                list.join(", ")
            }
        ))
    }

    /// Checks a hook against the ceilings, lowering limits the hook left at their
    /// defaults: the timeout of every handler type (command, HTTP and wasm alike), and the
    /// grants and limits of a wasm hook.
    ///
    /// # Errors
    ///
    /// The first grant above its ceiling, naming both.
    pub fn apply(
        &self,
        raw: &RawHandler,
        hook: &mut Hook,
        workspace: &Path,
        home: Option<&Path>,
        real: RealPath,
    ) -> Result<(), String> {
        // The time ceiling holds for every handler type (command, HTTP, wasm, and the types
        // hookhost does not run): a deadline is a limit of the hook, not of the sandbox.
        if self.timeout == Some(0.0) {
            return Err(
                "the managed ceiling `ceilings.timeout` is invalid, so the strictest applies: \
                 no hook outside managed policy may run"
                    .into(),
            );
        }
        if let Some(ceiling) = self.timeout {
            let asked = raw.timeout.or(raw.limits.as_ref().and_then(|l| l.timeout));
            match asked {
                Some(secs) if secs > ceiling => {
                    return Err(format!(
                        "`timeout` {secs} s is above the managed ceiling of {ceiling} s \
                         (`ceilings.timeout`)"
                    ));
                }
                None if hook.timeout.as_secs_f64() > ceiling => {
                    hook.timeout = Duration::try_from_secs_f64(ceiling).unwrap_or(hook.timeout);
                }
                _ => {}
            }
        }
        if let (HandlerSpec::Prompt(prompt), Some(models)) = (&hook.handler, &self.models)
            && let Some(kind) = prompt.provider
        {
            models
                .check(kind, None)
                .map_err(|e| format!("`provider`: {e}"))?;
        }
        let HandlerSpec::Wasm(spec) = &mut hook.handler else {
            return Ok(());
        };
        if let Some(reference) = &spec.oci {
            self.admits_registry(reference)?;
        }
        if let (Some(grant), Some(models)) = (&spec.capabilities.model, &self.models) {
            if let Some(kind) = spec.provider {
                models
                    .check(kind, None)
                    .map_err(|e| format!("`provider`: {e}"))?;
            }
            if let Some(ceiling) = models.tokens_per_event
                && grant.tokens_per_event > ceiling
            {
                return Err(format!(
                    "`capabilities.model.tokensPerEvent` {} is above the managed ceiling of \
                     {ceiling} (`ceilings.models.tokensPerEvent`)",
                    grant.tokens_per_event
                ));
            }
        }
        if let Some(ceilings) = &self.dirs {
            for (i, grant) in spec.capabilities.dirs.iter().enumerate() {
                let path = expand_path(&grant.path, workspace, home)
                    .map_err(|e| format!("`capabilities.dirs[{i}].path`: {e}"))?;
                let fits = ceilings.iter().any(|(ceiling, mode)| {
                    let Ok(top) = expand_path(ceiling, workspace, home) else {
                        return false;
                    };
                    let mode_ok = grant.mode == DirMode::ReadOnly || *mode == DirMode::ReadWrite;
                    mode_ok && path.starts_with(&top) && resolves_within(&path, &top, real)
                });
                if !fits {
                    let list: Vec<String> = ceilings
                        .iter()
                        .map(|(p, m)| format!("`{p}` ({})", mode_name(*m)))
                        .collect();
                    return Err(format!(
                        "`capabilities.dirs[{i}]` `{}` ({}) is above the managed ceiling \
                         `ceilings.dirs`: {}",
                        grant.path,
                        mode_name(grant.mode),
                        if list.is_empty() {
                            "no directories".to_string()
                        } else {
                            list.join(", ")
                        }
                    ));
                }
            }
        }
        if let Some(ceiling) = &self.env {
            for (i, name) in spec.capabilities.env.iter().enumerate() {
                if !super::env::allowlisted(name, ceiling) {
                    return Err(format!(
                        "`capabilities.env[{i}]` `{name}` is above the managed ceiling \
                         `ceilings.env`: [{}]",
                        ceiling.join(", ")
                    ));
                }
            }
        }
        if let Some(ceiling) = &self.http {
            for (i, text) in spec.capabilities.http.iter().enumerate() {
                let pattern = HostPattern::parse(text)
                    .map_err(|e| format!("`capabilities.http[{i}]`: {e}"))?;
                if !ceiling.iter().any(|c| pattern.within(c)) {
                    let list: Vec<&str> = ceiling.iter().map(HostPattern::as_str).collect();
                    return Err(format!(
                        "`capabilities.http[{i}]` `{text}` is above the managed ceiling \
                         `ceilings.http`: [{}]",
                        list.join(", ")
                    ));
                }
            }
        }
        if let Some(ceiling) = self.fuel {
            match spec.fuel {
                Some(fuel) if fuel > ceiling => {
                    return Err(format!(
                        "`limits.fuel` {fuel} is above the managed ceiling {ceiling} (`ceilings.fuel`)"
                    ));
                }
                None if DEFAULT_FUEL > ceiling => spec.fuel = Some(ceiling),
                _ => {}
            }
        }
        if let Some(ceiling) = self.memory_bytes {
            match spec.memory_bytes {
                Some(bytes) if bytes > ceiling => {
                    return Err(format!(
                        "`limits.memoryMb` {} ({bytes} bytes) is above the managed ceiling of \
                         {ceiling} bytes (`ceilings.memoryBytes` / `ceilings.memoryMb`)",
                        bytes >> 20
                    ));
                }
                None if DEFAULT_MEMORY_BYTES > ceiling => spec.memory_bytes = Some(ceiling),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Whether a directory whose real path (symlinks resolved, by the caller) is `real`,
/// mounted read-write when `write`, lies within a directory ceiling whose resolved path
/// is `top` and whose mode is `mode`. Pure, for the sandbox's check at instantiation:
/// the sandbox opens the granted directory, resolves the opened handle's real path, and
/// asks this.
pub fn resolved_dir_within(real: &Path, write: bool, top: &Path, mode: DirMode) -> bool {
    (!write || mode == DirMode::ReadWrite) && real.starts_with(top)
}

impl Ceilings {
    /// The directory ceilings as written, with their modes (`None`: managed policy sets
    /// no `ceilings.dirs`).
    pub fn dir_ceilings(&self) -> Option<&[(String, DirMode)]> {
        self.dirs.as_deref()
    }
}

/// How a path resolves to its real location (symlinks resolved), `None` where it does
/// not resolve. Policy does no I/O: the caller hands the filesystem's answer in
/// ([`crate::HostBuilder`] passes [`crate::config::file::real_path`]), tests a pure
/// function. The default resolves nothing, so only the written paths are compared.
#[derive(Clone, Copy)]
pub struct RealPath(pub fn(&Path) -> Option<PathBuf>);

impl Default for RealPath {
    fn default() -> Self {
        RealPath(|_| None)
    }
}

impl std::fmt::Debug for RealPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RealPath(..)")
    }
}

/// Where both resolve, the grant's real location is below the ceiling's real location,
/// so a symlink inside an allowed directory cannot reach out.
fn resolves_within(grant: &Path, top: &Path, real: RealPath) -> bool {
    match ((real.0)(grant), (real.0)(top)) {
        (Some(g), Some(t)) => g.starts_with(t),
        _ => true,
    }
}

#[cfg(test)]
#[path = "ceiling_tests.rs"]
mod tests;
