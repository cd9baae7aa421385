//! wasi-http outgoing bodies charged to the store's memory limit
//! ([`super::state::Limiter::hold`]) by their write budget: what the body's stream may
//! buffer on the host before anything reads it (`p2_outgoing_body_buffer_chunks` + 1
//! chunks of [`super::held::entry_bytes`], [`super::http_policy`]), shared with linear
//! memory, so a plugin at its limit in linear memory cannot park as much again in
//! bodies.
//!
//! `outgoing-request.body` and `outgoing-response.body` charge the budget before
//! wasi-http makes the body (refused with the call's error, and the memory limit named
//! in the report, when it does not fit). The buffered bytes live in the channel whose
//! receiver the request (or response) holds, so the charge is the request's: given back
//! when it is dropped, or, when it left the table another way (handed to
//! `outgoing-handler.handle`, whose connection then holds the bytes, one of 8), when the
//! next body is made. The budget is charged whole: wasmtime-wasi-http 48 keeps the
//! channel private, so how full it is cannot be read.

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceType};
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::http::types::{
    HostOutgoingRequest as RequestCalls, HostOutgoingResponse as ResponseCalls,
};
use wasmtime_wasi_http::p2::body::HostOutgoingBody;
use wasmtime_wasi_http::p2::types::{HostOutgoingRequest, HostOutgoingResponse};

use super::state::State;

/// The wasi-http version whose interfaces the linker defines.
const WASI_HTTP: &str = "0.2.12";

type Body = wasmtime::Result<(Result<Resource<HostOutgoingBody>, ()>,)>;

impl State {
    /// What one outgoing body's stream may buffer: one chunk plus the one the channel
    /// always keeps room for.
    pub fn body_budget(&self) -> usize {
        2 * self.entry_bytes
    }

    /// Gives back the charges of requests and responses that left the table another way.
    fn sweep_bodies(&mut self) {
        let table = &self.table;
        let gone_requests: Vec<u32> = self
            .body_bytes
            .requests
            .keys()
            .copied()
            .filter(|rep| {
                table
                    .get(&Resource::<HostOutgoingRequest>::new_borrow(*rep))
                    .is_err()
            })
            .collect();
        let gone_responses: Vec<u32> = self
            .body_bytes
            .responses
            .keys()
            .copied()
            .filter(|rep| {
                table
                    .get(&Resource::<HostOutgoingResponse>::new_borrow(*rep))
                    .is_err()
            })
            .collect();
        let mut bytes = 0;
        for rep in gone_requests {
            bytes += self.body_bytes.requests.remove(&rep).unwrap_or(0);
        }
        for rep in gone_responses {
            bytes += self.body_bytes.responses.remove(&rep).unwrap_or(0);
        }
        self.limiter.release(bytes);
    }

    /// Charges a body's budget ahead of making it; `None` when it does not fit.
    fn precharge_body(&mut self) -> Option<usize> {
        self.sweep_bodies();
        let budget = self.body_budget();
        self.limiter.hold(budget).ok().map(|()| budget)
    }

    /// Settles a charge after the call: kept for `rep` when a body was made, else given
    /// back.
    fn settle_body(&mut self, response: bool, rep: u32, made: bool, budget: usize) {
        if !made {
            self.limiter.release(budget);
            return;
        }
        let charged = if response {
            &mut self.body_bytes.responses
        } else {
            &mut self.body_bytes.requests
        };
        // A rep taken again: what the one before held went with it.
        if let Some(old) = charged.insert(rep, budget) {
            self.limiter.release(old);
        }
    }
}

fn settled(
    store: &mut StoreContextMut<'_, State>,
    response: bool,
    rep: u32,
    result: wasmtime::Result<Result<Resource<HostOutgoingBody>, ()>>,
    budget: usize,
) -> Body {
    let made = matches!(result, Ok(Ok(_)));
    store.data_mut().settle_body(response, rep, made, budget);
    Ok((result?,))
}

/// Adds the charged versions of `outgoing-request.body` and `outgoing-response.body`,
/// and of the two resources' destructors, over wasi-http's own.
pub(super) fn add(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    let mut types = linker.instance(&format!("wasi:http/types@{WASI_HTTP}"))?;
    types.resource(
        "outgoing-request",
        ResourceType::host::<HostOutgoingRequest>(),
        |mut store, rep| {
            let data = store.data_mut();
            data.table
                .delete(Resource::<HostOutgoingRequest>::new_own(rep))?;
            let bytes = data.body_bytes.requests.remove(&rep).unwrap_or(0);
            data.limiter.release(bytes);
            Ok(())
        },
    )?;
    types.resource(
        "outgoing-response",
        ResourceType::host::<HostOutgoingResponse>(),
        |mut store, rep| {
            let data = store.data_mut();
            data.table
                .delete(Resource::<HostOutgoingResponse>::new_own(rep))?;
            let bytes = data.body_bytes.responses.remove(&rep).unwrap_or(0);
            data.limiter.release(bytes);
            Ok(())
        },
    )?;
    types.func_wrap(
        "[method]outgoing-request.body",
        |mut store: StoreContextMut<'_, State>,
         (request,): (Resource<HostOutgoingRequest>,)|
         -> Body {
            let rep = request.rep();
            let Some(budget) = store.data_mut().precharge_body() else {
                return Ok((Err(()),));
            };
            let result = RequestCalls::body(&mut store.data_mut().http(), request);
            settled(&mut store, false, rep, result, budget)
        },
    )?;
    types.func_wrap(
        "[method]outgoing-response.body",
        |mut store: StoreContextMut<'_, State>,
         (response,): (Resource<HostOutgoingResponse>,)|
         -> Body {
            let rep = response.rep();
            let Some(budget) = store.data_mut().precharge_body() else {
                return Ok((Err(()),));
            };
            let result = ResponseCalls::body(&mut store.data_mut().http(), response);
            settled(&mut store, true, rep, result, budget)
        },
    )?;
    Ok(())
}
