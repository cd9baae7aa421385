//! Where the sandbox meets the OCI cache: a hook's `oci://` plugin becomes the cached
//! layer file and its digest, pulled first (within the hook's deadline) when not cached.

use std::path::PathBuf;
use std::sync::Arc;

use super::{CachedPlugin, OciStore};
use crate::handlers::FailureKind;
use crate::handlers::wasm::{LoadError, PluginCall, Sandbox, WasmRuntime};
use crate::policy::oci::OciRef;

impl WasmRuntime {
    /// Where plugins pulled from OCI registries are cached (default `oci/` in the data
    /// directory; `None`: `oci://` plugins cannot run).
    pub fn with_oci_dir(mut self, dir: Option<PathBuf>) -> WasmRuntime {
        self.oci_dir = dir;
        self
    }

    /// The OCI cache this runtime reads and pulls into, if any.
    pub fn oci_store(&self) -> Option<OciStore> {
        self.oci_dir
            .clone()
            .map(|dir| OciStore::new(dir, self.max_plugin_bytes))
    }

    /// The cached artifact of `reference`, if it is cached (no registry asked).
    ///
    /// # Errors
    ///
    /// As [`OciStore::cached`]; also when this runtime has no OCI cache.
    pub fn oci_cached(&self, reference: &OciRef) -> Result<Option<CachedPlugin>, String> {
        self.oci_store()
            .ok_or_else(|| no_cache(reference))?
            .cached(reference)
    }
}

fn no_cache(reference: &OciRef) -> String {
    format!("`{reference}` cannot be loaded: this host has no OCI cache")
}

impl Sandbox {
    /// The file and digest to load for a call whose plugin is `reference`: the cached
    /// layer, pinned to its digest (and to the hook's own `sha256` when it sets one). Not
    /// cached: pulled, the pull waited for no longer than the hook's timeout (it goes on
    /// meanwhile, for the next event).
    pub(in crate::handlers::wasm) async fn oci_plugin(
        &self,
        reference: &OciRef,
        call: &PluginCall,
    ) -> Result<(PathBuf, Option<String>), LoadError> {
        let store = self
            .oci
            .clone()
            .ok_or_else(|| (FailureKind::CannotStart, no_cache(reference)))?;
        let cached = match store.cached(reference) {
            Ok(Some(cached)) => cached,
            Ok(None) => {
                let pulled = Arc::new(reference.clone());
                let pull = tokio::spawn(async move { store.pull_once(&pulled).await });
                match tokio::time::timeout(call.timeout, pull).await {
                    Ok(Ok(Ok(cached))) => cached,
                    Ok(Ok(Err(message))) => return Err((FailureKind::CannotStart, message)),
                    Ok(Err(join)) => {
                        return Err((
                            FailureKind::CannotStart,
                            format!("pulling `{reference}` failed: {join}"),
                        ));
                    }
                    Err(_) => {
                        return Err((
                            FailureKind::Timeout,
                            format!(
                                "pulling `{reference}` did not finish within the hook's timeout \
                                 of {} s (`hookhost plugin pull` fetches it ahead)",
                                call.timeout.as_secs_f64()
                            ),
                        ));
                    }
                }
            }
            Err(message) => return Err((FailureKind::CannotStart, message)),
        };
        if let Some(pin) = &call.sha256
            && !pin.eq_ignore_ascii_case(&cached.layer)
        {
            return Err((
                FailureKind::NotAdmitted,
                format!(
                    "plugin `{reference}`: its component is sha256 {}, not the hook's `sha256` \
                     pin {pin}",
                    cached.layer
                ),
            ));
        }
        Ok((cached.path, Some(cached.layer)))
    }
}
