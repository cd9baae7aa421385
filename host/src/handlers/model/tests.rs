//! [`Resolved::complete`]'s budget against a provider whose token counts are hostile.

use std::sync::Mutex;

use serde_json::json;

use super::*;

/// A provider answering each request with the next of its `(input, output)` counts, and
/// keeping the `max_tokens` of each request it was sent.
struct Counts(Mutex<Vec<(u64, u64)>>, Mutex<Vec<u64>>);

impl Counts {
    fn new(counts: Vec<(u64, u64)>) -> Counts {
        Counts(Mutex::new(counts), Mutex::default())
    }
}

impl ModelClient for Counts {
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        self.1.lock().unwrap().push(request.max_tokens);
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
    let client = Counts::new(vec![(2, 3), (u64::MAX - 4, 0), (1, 1)]);
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

fn resolved(client: &Arc<Counts>, budget: u64) -> Resolved {
    Resolved::new(
        ModelProviderKind::Embedder,
        None,
        None,
        client.clone(),
        Some(budget),
    )
}

/// Red team, stop 35: a budget lowered only the output tokens asked for, so one request
/// of 40,000 bytes went out whole under a budget of 100 tokens and the provider billed a
/// hundred times the grant. `Resolved::complete` now refuses, without sending, a request
/// whose estimated input leaves no output token of what is left.
#[tokio::test]
async fn one_large_request_is_refused_before_it_is_sent() {
    let client = Arc::new(Counts::new(vec![(60, 10)]));
    let run = resolved(&client, 100);
    let mut large = request();
    large.prompt = "word ".repeat(8_000);
    assert_eq!(large.estimated_input_tokens(), 10_000);
    let refused = run.complete(large).await.unwrap_err();
    assert_eq!(refused.kind, FailureKind::Limit, "{}", refused.message);
    assert!(
        refused.message.contains("about 10000 tokens")
            && refused.message.contains("40000 bytes")
            && refused.message.contains("not sent"),
        "{}",
        refused.message
    );
    assert!(client.1.lock().unwrap().is_empty(), "nothing was sent");
    assert_eq!(run.tokens_used(), 0);

    // A request that fits is sent, its output lowered to what its input leaves.
    let mut fits = request();
    fits.prompt = "x".repeat(200); // 50 tokens
    run.complete(fits.clone()).await.unwrap();
    assert_eq!(*client.1.lock().unwrap(), vec![100 - 50]);
    // The provider billed 70: the same request (50 of the 30 left) is refused.
    let refused = run.complete(fits).await.unwrap_err();
    assert!(
        refused.message.contains("does not fit the 30 left"),
        "{}",
        refused.message
    );
    assert_eq!(client.1.lock().unwrap().len(), 1);
}

/// Every part of a request is text the provider reads and bills: tools, turns and the
/// schema count, not only the prompt.
#[test]
fn the_estimate_counts_every_part_of_the_request() {
    let base = request();
    let bytes = base.text_bytes();
    let grown = |change: &dyn Fn(&mut ModelRequest)| {
        let mut r = request();
        change(&mut r);
        r.text_bytes() - bytes
    };
    let big = "y".repeat(1_000);
    let value = json!({"k": big});
    assert_eq!(grown(&|r| r.system = big.clone()), 1_000);
    assert!(grown(&|r| r.schema = Some(value.clone())) > 1_000);
    assert!(
        grown(&|r| r.tools.push(ToolDef {
            name: "t".into(),
            description: String::new(),
            input_schema: value.clone(),
        })) > 1_000
    );
    assert!(
        grown(&|r| r.turns.push(Turn::Assistant {
            text: String::new(),
            calls: vec![ToolCall {
                id: String::new(),
                name: String::new(),
                input: value.clone(),
            }],
        })) > 1_000
    );
    assert_eq!(
        grown(&|r| r.turns.push(Turn::ToolResults {
            results: vec![ToolResult {
                id: String::new(),
                content: big.clone(),
                is_error: false,
            }],
        })),
        1_000
    );
    assert_eq!(
        grown(&|r| r.turns.push(Turn::User { text: big.clone() })),
        1_000
    );
}
