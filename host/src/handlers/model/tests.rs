//! [`Resolved::complete`]'s budget against a provider whose token counts are hostile.

use std::sync::Mutex;

use super::*;

/// A provider answering each request with the next of its `(input, output)` counts.
struct Counts(Mutex<Vec<(u64, u64)>>);

impl ModelClient for Counts {
    fn complete<'a>(
        &'a self,
        _: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        let (input_tokens, output_tokens) = self.0.lock().unwrap().remove(0);
        Box::pin(async move {
            Ok(ModelReply {
                text: "ok".into(),
                input_tokens,
                output_tokens,
                ..ModelReply::default()
            })
        })
    }
}

fn request() -> ModelRequest {
    ModelRequest {
        model: None,
        system: String::new(),
        prompt: "judge".into(),
        schema: None,
        max_tokens: DEFAULT_MAX_TOKENS,
        tools: Vec::new(),
        turns: Vec::new(),
    }
}

/// Red team, stop 35: the provider's counts were added with a wrapping `fetch_add`, so
/// a server that answered 5 tokens and then `u64::MAX - 4` brought the run's count back
/// to 0 and the spent budget back whole (a plugin could ask for ever). Fixed at
/// `Resolved::spend`, the one place a run's tokens are counted: saturating.
#[tokio::test]
async fn a_provider_cannot_wrap_the_count_back_to_an_unspent_budget() {
    let client = Counts(Mutex::new(vec![(2, 3), (u64::MAX - 4, 0), (1, 1)]));
    let resolved = Resolved::new(
        ModelProviderKind::Embedder,
        None,
        None,
        Arc::new(client),
        Some(100),
    );
    resolved.complete(request()).await.unwrap();
    assert_eq!(resolved.tokens_used(), 5);
    resolved.complete(request()).await.unwrap();
    assert_eq!(resolved.tokens_used(), u64::MAX, "the count saturates");
    let refused = resolved.complete(request()).await.unwrap_err();
    assert_eq!(refused.kind, FailureKind::Limit, "{}", refused.message);
    assert!(refused.message.contains("is spent"), "{}", refused.message);
}
