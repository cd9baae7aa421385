//! What the client that dispatched an event lends its hooks over `hookhost serve`: its
//! model ([`super::model::with_caller_model`]) and its MCP servers
//! ([`super::mcp::with_caller_mcp`]). Both are task-local to the dispatch; an async
//! hook runs in a task of its own, after the client has its answer, so it takes them
//! along ([`Caller::current`], [`Caller::scope`]) and can still ask the client while its
//! connection is open.

use std::future::Future;
use std::sync::Arc;

use super::mcp::{McpProvider, caller_mcp, with_caller_mcp};
use super::model::{ModelClient, caller_model, with_caller_model};

/// The caller's model and MCP servers, as the dispatch that is running sees them.
#[derive(Default)]
pub struct Caller {
    model: Option<Arc<dyn ModelClient>>,
    mcp: Option<Arc<dyn McpProvider>>,
}

impl Caller {
    /// What the dispatch running now was lent (nothing outside `hookhost serve`).
    pub fn current() -> Caller {
        Caller {
            model: caller_model(),
            mcp: caller_mcp(),
        }
    }

    /// Runs `future` lent the same.
    pub async fn scope<F: Future>(self, future: F) -> F::Output {
        let mcp = self.mcp;
        let with_mcp = async move {
            match mcp {
                Some(provider) => with_caller_mcp(provider, future).await,
                None => future.await,
            }
        };
        match self.model {
            Some(client) => with_caller_model(client, with_mcp).await,
            None => with_mcp.await,
        }
    }
}
