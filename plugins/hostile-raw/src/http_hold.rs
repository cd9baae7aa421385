//! Incoming HTTP responses held on the host: `n` responses of `url` opened at once, each
//! read a byte into and then kept, so that the host buffers the rest for them; then
//! read round-robin. With `grow`, linear memory is grown (after the requests are made, before they are sent) to the plugin's limit, a
//! page at a time, until the host refuses, so nothing the host holds for a response
//! fits beside it.

use wasip2::http::types::{
    Fields, FutureIncomingResponse, IncomingBody, IncomingResponse, Method, OutgoingBody,
    OutgoingRequest,
};
use wasip2::io::streams::InputStream;

use crate::exports::hookhost::hook::hook::Response;
use crate::{context, parse_url};

/// What one held response keeps alive.
type Held = (InputStream, IncomingBody, IncomingResponse);

/// A GET of `url`, made but not sent (its header map and body are made now).
fn request(url: &str) -> (OutgoingRequest, OutgoingBody) {
    let (scheme, authority, path) = parse_url(url);
    let request = OutgoingRequest::new(Fields::new());
    let _ = request.set_method(&Method::Get);
    let _ = request.set_scheme(Some(&scheme));
    let _ = request.set_authority(Some(&authority));
    let _ = request.set_path_with_query(Some(&path));
    let body = request.body().expect("body");
    (request, body)
}

fn open((request, body): (OutgoingRequest, OutgoingBody)) -> Result<Held, String> {
    let future: FutureIncomingResponse =
        wasip2::http::outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    let _ = OutgoingBody::finish(body, None);
    future.subscribe().block();
    let response = match future.get() {
        Some(Ok(Ok(r))) => r,
        Some(Ok(Err(e))) => return Err(format!("{e:?}")),
        _ => return Err("no response".into()),
    };
    let body = response.consume().map_err(|()| "no body")?;
    let stream = body.stream().map_err(|()| "no stream")?;
    stream.blocking_read(1).map_err(|e| format!("{e:?}"))?;
    Ok((stream, body, response))
}

/// Holds `n` responses of `url`, then reads each `rounds` more times; says how many it
/// held, the largest chunk one read got, and the errors.
pub fn http_hold(url: &str, n: usize, grow: bool, rounds: usize) -> Result<Response, String> {
    let requests: Vec<_> = (0..n).map(|_| request(url)).collect();
    #[cfg_attr(not(target_arch = "wasm32"), allow(unused_mut))]
    let mut pages = 0usize;
    // Natively (the plugins' own unit tests) there is no linear memory to grow.
    #[cfg(target_arch = "wasm32")]
    if grow {
        while core::arch::wasm32::memory_grow::<0>(1) != usize::MAX {
            pages += 1;
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    let _ = grow;
    let mut held = Vec::new();
    let mut errors = Vec::new();
    for request in requests {
        match open(request) {
            Ok(h) => held.push(h),
            Err(e) => errors.push(e),
        }
    }
    let (mut largest, mut total) = (0usize, 0usize);
    for _ in 0..rounds {
        for (stream, _, _) in &held {
            match stream.blocking_read(1 << 20) {
                Ok(chunk) => {
                    largest = largest.max(chunk.len());
                    total += chunk.len();
                }
                Err(e) => errors.push(format!("{e:?}")),
            }
        }
    }
    Ok(context(format!(
        "grew {pages} pages; held {} responses; read {total} bytes, largest chunk {largest}; errors {errors:?}",
        held.len()
    )))
}
