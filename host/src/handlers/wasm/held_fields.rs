//! wasi-http `fields` charged by their bytes to the store's memory limit
//! ([`super::state::Limiter::hold`]), which they share with linear memory: a plugin at
//! its limit in linear memory cannot park as much again in header maps on the host.
//!
//! Every call that makes or grows a `fields` (`constructor`, `from-list`, `set`,
//! `append`, `clone`) charges what it may add before wasi-http runs it (refused with
//! `forbidden`, and the memory limit named in the report, when it does not fit), then the
//! charge is settled to the map's real size (names and values); `delete` and dropping
//! the map give it back. A map that leaves the table another way (moved into an outgoing
//! request or response) is given back when the next map is made. Maps the host makes
//! (response headers) are bounded by the HTTP client's own header limits.

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceType};
use wasmtime_wasi_http::FieldMap;
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::HeaderResult;
use wasmtime_wasi_http::p2::bindings::http::types::{HeaderError, HostFields};

use super::state::State;

/// The wasi-http version whose interfaces the linker defines.
const WASI_HTTP: &str = "0.2.12";
/// Host memory an empty map holds besides its entries.
const MAP_BYTES: usize = std::mem::size_of::<FieldMap>() + 64;

/// The real size of the map `rep` (or `None` when it is gone from the table).
fn size_of(state: &State, rep: u32) -> Option<usize> {
    let map = state
        .table
        .get(&Resource::<FieldMap>::new_borrow(rep))
        .ok()?;
    Some(
        MAP_BYTES
            + map
                .iter()
                .map(|(name, value)| name.as_str().len() + value.len())
                .sum::<usize>(),
    )
}

impl State {
    /// Charges `bytes` ahead of a call that may add them, or refuses.
    fn precharge_fields(&mut self, bytes: usize) -> Result<(), HeaderError> {
        self.limiter.hold(bytes).map_err(|_| HeaderError::Forbidden)
    }

    /// Settles the charge of map `rep` to its real size, `precharged` having been held
    /// for the call.
    fn settle_fields(&mut self, rep: Option<u32>, precharged: usize) {
        let mut charged = precharged;
        if let Some(rep) = rep {
            charged += self.field_bytes.charged.remove(&rep).unwrap_or(0);
            if let Some(now) = size_of(self, rep) {
                // The charge follows the map's real size (over the limit only by what
                // wasi-http added within its own per-map cap).
                if now > charged {
                    let _ = self.limiter.hold(now - charged);
                } else {
                    self.limiter.release(charged - now);
                }
                self.field_bytes.charged.insert(rep, now);
                charged = 0;
            }
        }
        self.limiter.release(charged);
    }

    /// Gives back what maps that left the table another way held (moved into a request
    /// or response): swept when a map is made, by presence only (O(1) each), so the
    /// sweeps of n maps cost n² lookups at most, never n² map walks.
    fn sweep_fields(&mut self) {
        let table = &self.table;
        let gone: Vec<u32> = self
            .field_bytes
            .charged
            .keys()
            .copied()
            .filter(|rep| table.get(&Resource::<FieldMap>::new_borrow(*rep)).is_err())
            .collect();
        for rep in gone {
            let bytes = self.field_bytes.charged.remove(&rep).unwrap_or(0);
            self.limiter.release(bytes);
        }
    }
}

type Made = wasmtime::Result<(Result<Resource<FieldMap>, HeaderError>,)>;
type Done = wasmtime::Result<(Result<(), HeaderError>,)>;

fn made(
    store: &mut StoreContextMut<'_, State>,
    result: HeaderResult<Resource<FieldMap>>,
    pre: usize,
) -> Made {
    let result = match result {
        Ok(fields) => Ok(fields),
        Err(e) => Err(e.downcast()?),
    };
    let rep = result.as_ref().ok().map(Resource::rep);
    store.data_mut().settle_fields(rep, pre);
    Ok((result,))
}

fn done(
    store: &mut StoreContextMut<'_, State>,
    rep: u32,
    result: HeaderResult<()>,
    pre: usize,
) -> Done {
    let result = match result {
        Ok(()) => Ok(()),
        Err(e) => Err(e.downcast()?),
    };
    store.data_mut().settle_fields(Some(rep), pre);
    Ok((result,))
}

/// Adds the charged versions of wasi-http's `fields` calls over wasi-http's own.
pub(super) fn add(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    let mut types = linker.instance(&format!("wasi:http/types@{WASI_HTTP}"))?;
    types.resource(
        "fields",
        ResourceType::host::<FieldMap>(),
        |mut store, rep| {
            let data = store.data_mut();
            data.table.delete(Resource::<FieldMap>::new_own(rep))?;
            let bytes = data.field_bytes.charged.remove(&rep).unwrap_or(0);
            data.limiter.release(bytes);
            Ok(())
        },
    )?;
    types.func_wrap(
        "[constructor]fields",
        |mut store: StoreContextMut<'_, State>,
         (): ()|
         -> wasmtime::Result<(Resource<FieldMap>,)> {
            if store.data_mut().limiter.hold(MAP_BYTES).is_err() {
                wasmtime::bail!("the memory limit is reached: no room for a new `fields`");
            }
            store.data_mut().sweep_fields();
            let fields = HostFields::new(&mut store.data_mut().http())?;
            store
                .data_mut()
                .settle_fields(Some(fields.rep()), MAP_BYTES);
            Ok((fields,))
        },
    )?;
    types.func_wrap(
        "[static]fields.from-list",
        |mut store: StoreContextMut<'_, State>, (entries,): (Vec<(String, Vec<u8>)>,)| -> Made {
            let pre = MAP_BYTES
                + entries
                    .iter()
                    .map(|(n, v)| n.len() + v.len())
                    .sum::<usize>();
            if let Err(e) = store.data_mut().precharge_fields(pre) {
                return Ok((Err(e),));
            }
            store.data_mut().sweep_fields();
            let result = HostFields::from_list(&mut store.data_mut().http(), entries);
            made(&mut store, result, pre)
        },
    )?;
    types.func_wrap(
        "[method]fields.clone",
        |mut store: StoreContextMut<'_, State>,
         (fields,): (Resource<FieldMap>,)|
         -> wasmtime::Result<(Resource<FieldMap>,)> {
            let pre = size_of(store.data(), fields.rep()).unwrap_or(MAP_BYTES);
            if store.data_mut().limiter.hold(pre).is_err() {
                wasmtime::bail!("the memory limit is reached: no room to clone a `fields`");
            }
            store.data_mut().sweep_fields();
            let copy = HostFields::clone(&mut store.data_mut().http(), fields)?;
            store.data_mut().settle_fields(Some(copy.rep()), pre);
            Ok((copy,))
        },
    )?;
    types.func_wrap(
        "[method]fields.set",
        |mut store: StoreContextMut<'_, State>,
         (fields, name, values): (Resource<FieldMap>, String, Vec<Vec<u8>>)|
         -> Done {
            let rep = fields.rep();
            let pre = name.len() + values.iter().map(Vec::len).sum::<usize>();
            if let Err(e) = store.data_mut().precharge_fields(pre) {
                return Ok((Err(e),));
            }
            let result = HostFields::set(&mut store.data_mut().http(), fields, name, values);
            done(&mut store, rep, result, pre)
        },
    )?;
    types.func_wrap(
        "[method]fields.append",
        |mut store: StoreContextMut<'_, State>,
         (fields, name, value): (Resource<FieldMap>, String, Vec<u8>)|
         -> Done {
            let rep = fields.rep();
            let pre = name.len() + value.len();
            if let Err(e) = store.data_mut().precharge_fields(pre) {
                return Ok((Err(e),));
            }
            let result = HostFields::append(&mut store.data_mut().http(), fields, name, value);
            done(&mut store, rep, result, pre)
        },
    )?;
    types.func_wrap(
        "[method]fields.delete",
        |mut store: StoreContextMut<'_, State>,
         (fields, name): (Resource<FieldMap>, String)|
         -> Done {
            let rep = fields.rep();
            let result = HostFields::delete(&mut store.data_mut().http(), fields, name);
            done(&mut store, rep, result, 0)
        },
    )?;
    Ok(())
}
