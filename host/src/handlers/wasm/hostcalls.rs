//! Host calls the sandbox replaces or wraps in the linker, so that the work a plugin
//! makes the host do on its behalf is bounded like the plugin's own:
//!
//! - **Sleeps** (`monotonic-clock.subscribe-*`) end at the call's deadline.
//! - **Paths** (`descriptor.open-at` and every other call that reaches a path, changes a
//!   file or lists a directory) pass [`super::guest_fs`]: host-owned places (nested ones
//!   by name) are not changed, private files are not seen, a FIFO or a device is never
//!   opened. Every descriptor opened comes from the host's budget ([`super::held`]) and
//!   goes back when the plugin drops it.
//! - **Directory listings**, which wasmtime-wasi reads whole, are charged to the store's
//!   memory limit while the plugin holds their stream ([`Listing`]).
//! - **Every host call** is charged [`FUEL_PER_HOST_CALL`] by [`meter`], the store's call
//!   hook, at every transition from wasm into the host: whatever the function (WASI,
//!   wasi-http, the `host` import, a resource destructor, anything linked later), no list
//!   names it, so none can be left out.
//! - **Bytes moved** by the host are charged on top, [`FUEL_PER_BYTE`] per byte: stream
//!   reads and writes (stdout, files, HTTP bodies), positional file reads and writes,
//!   opened paths, `host.log` records, the text of `model.complete` requests and replies
//!   ([`super::model_call`]), and random bytes drawn. A plugin that floods the
//!   host with work runs out of fuel as a wasm loop does.
//! - **wasi-http** is linked only for hooks with an HTTP grant; for the others every
//!   wasi-http function the component imports traps with [`HttpNotGranted`].
//!
//! Each wrapper calls wasmtime-wasi's own implementation for the work itself.

use std::time::Duration;

use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Linker, Resource, ResourceType};
use wasmtime::{CallHook, Store, StoreContextMut, Trap};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self as fs, DirectoryEntry, ErrorCode, Filesize, HostDescriptor,
};
use wasmtime_wasi::p2::{DynPollable, FsResult};
use wasmtime_wasi_io::bindings::wasi::io::streams::{
    self, HostInputStream, HostOutputStream, StreamError,
};
use wasmtime_wasi_io::streams::{DynInputStream, DynOutputStream};

use super::bindings::Level;
use super::state::State;

/// Fuel charged per byte a host call moves between the plugin and the host.
pub const FUEL_PER_BYTE: u64 = 1;
/// Fuel charged per host call (every transition from wasm into the host), for the work a
/// call costs whatever it moves: about what the host spends on a call that does nothing
/// (`monotonic-clock.now`), in the time wasm spends on as many instructions.
pub const FUEL_PER_HOST_CALL: u64 = 100;
/// Fuel charged per `host.log` record, which is formatted and kept.
pub const FUEL_PER_LOG_RECORD: u64 = 1_000;

/// The WASI 0.2 version whose interfaces the linker defines (guests built for any 0.2.x
/// match them).
pub(super) const WASI: &str = "0.2.12";

/// A wasi-http function called by a plugin whose hook has no HTTP grant: wasi-http is
/// not linked for it.
#[derive(Debug)]
pub struct HttpNotGranted(pub String);

impl std::fmt::Display for HttpNotGranted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the plugin called `{}`, but outgoing HTTP is not granted to this hook \
             (`capabilities.http`), so wasi-http is not available to it",
            self.0
        )
    }
}

impl std::error::Error for HttpNotGranted {}

/// The resource type that stands in for wasi-http's resources where it is not linked.
struct NoHttp;

/// Takes `units` of fuel from the store for host work, or traps with
/// [`Trap::OutOfFuel`] when fewer are left (the store then has none).
pub fn charge(store: &mut StoreContextMut<'_, State>, units: u64) -> wasmtime::Result<()> {
    let left = store.get_fuel()?;
    store.data_mut().host_fuel += units.min(left);
    if units > left {
        store.set_fuel(0)?;
        return Err(Trap::OutOfFuel.into());
    }
    store.set_fuel(left - units)?;
    Ok(())
}

/// Fuel for the bytes a call moved (the call itself is charged by [`meter`]).
pub(super) fn cost(bytes: usize) -> u64 {
    (bytes as u64).saturating_mul(FUEL_PER_BYTE)
}

/// The one place every host call passes: the store's call hook, which wasmtime runs at
/// each transition from wasm into the host (imported functions of every interface,
/// resource destructors, and wasmtime's own libcalls such as `memory.grow`), charges
/// [`FUEL_PER_HOST_CALL`] before the host does any work, and traps with
/// [`Trap::OutOfFuel`] when the store has less. Installed on every store the sandbox
/// makes ([`super::engine`]'s `Sandbox::store`).
pub fn meter(store: &mut Store<State>) {
    store.call_hook(|mut store, hook| {
        if matches!(hook, CallHook::CallingHost) {
            store.data_mut().host_calls += 1;
            charge(&mut store, FUEL_PER_HOST_CALL)?;
        }
        Ok(())
    });
}

/// Adds every wrapper of this module to `linker`, over the definitions of
/// wasmtime-wasi (and the `host` import) already in it, and over the filesystem's
/// ([`super::guest_fs::add`], linked first by the engine).
pub fn add(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    clamp_sleeps(linker)?;
    hold_descriptors(linker)?;
    hold_listings(linker)?;
    meter_streams(linker)?;
    meter_files(linker)?;
    meter_log(linker)?;
    meter_random(linker)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Replaces `monotonic-clock.subscribe-duration` / `subscribe-instant` with versions
/// whose sleeps end at the call's deadline: wasm code is interrupted by the epoch
/// deadline, but a guest blocked in a host sleep would otherwise outlive its timeout.
fn clamp_sleeps(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    let mut clock = linker.instance(&format!("wasi:clocks/monotonic-clock@{WASI}"))?;
    clock.func_wrap(
        "subscribe-duration",
        |mut store: StoreContextMut<'_, State>,
         (nanos,): (u64,)|
         -> wasmtime::Result<(Resource<DynPollable>,)> {
            let until = std::time::Instant::now().checked_add(Duration::from_nanos(nanos));
            let until = until
                .unwrap_or_else(|| std::time::Instant::now() + Duration::from_secs(86_400 * 365));
            Ok((store.data_mut().sleep_until(until)?,))
        },
    )?;
    clock.func_wrap(
        "subscribe-instant",
        |mut store: StoreContextMut<'_, State>,
         (when,): (u64,)|
         -> wasmtime::Result<(Resource<DynPollable>,)> {
            let until = store.data().clock.instant(when);
            Ok((store.data_mut().sleep_until(until)?,))
        },
    )?;
    Ok(())
}

/// The destructor of `descriptor`, as wasmtime-wasi's (the descriptor leaves the table
/// and closes), giving its descriptor back to the host's budget.
fn hold_descriptors(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    let mut types = linker.instance(&format!("wasi:filesystem/types@{WASI}"))?;
    types.resource(
        "descriptor",
        ResourceType::host::<Descriptor>(),
        |mut store, rep| {
            let data = store.data_mut();
            data.table.delete(Resource::<Descriptor>::new_own(rep))?;
            data.descriptors.closed(rep);
            Ok(())
        },
    )?;
    Ok(())
}

/// A directory listing as the plugin reads it. wasmtime-wasi reads a directory whole when
/// its stream opens; the bytes kept are charged to the store's memory limit
/// ([`super::state::Limiter::hold`]) until the plugin drops the stream.
pub struct Listing {
    entries: std::vec::IntoIter<FsResult<DirectoryEntry>>,
    bytes: usize,
}

/// Host memory one listed entry keeps besides its name.
const LISTED_ENTRY_BYTES: usize = std::mem::size_of::<FsResult<DirectoryEntry>>();

/// `descriptor.read-directory` and its stream, as [`Listing`]s: charged to fuel by the
/// bytes listed and to the memory limit for as long as the stream is held; a listing
/// that does not fit is refused with `insufficient-memory`.
fn hold_listings(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    type Next = wasmtime::Result<(Result<Option<DirectoryEntry>, ErrorCode>,)>;
    let mut types = linker.instance(&format!("wasi:filesystem/types@{WASI}"))?;
    types.resource(
        "directory-entry-stream",
        ResourceType::host::<Listing>(),
        |mut store, rep| {
            let data = store.data_mut();
            let listing = data.table.delete(Resource::<Listing>::new_own(rep))?;
            data.limiter.release(listing.bytes);
            Ok(())
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.read-directory",
        |mut store: StoreContextMut<'_, State>, (fd,): (Resource<Descriptor>,)| {
            Box::new(async move {
                let dir = fd.rep();
                let mut view = store.data_mut().filesystem();
                let stream = match HostDescriptor::read_directory(&mut view, fd).await {
                    Ok(stream) => stream,
                    Err(e) => return Ok((Err(fs::Host::convert_error_code(&mut view, e)?),)),
                };
                let mut entries: Vec<_> =
                    store.data_mut().table.delete(stream)?.into_iter().collect();
                // Private files are not listed ([`super::guest_fs`]).
                if let Some(real) = store.data().dir_real_path(dir)? {
                    let data = store.data();
                    entries.retain(|e| e.as_ref().map_or(true, |e| data.listed(&real, &e.name)));
                }
                let bytes = entries
                    .iter()
                    .map(|e| LISTED_ENTRY_BYTES + e.as_ref().map_or(0, |e| e.name.len()))
                    .sum::<usize>();
                charge(&mut store, cost(bytes))?;
                if store.data_mut().limiter.hold(bytes).is_err() {
                    return Ok((Err(ErrorCode::InsufficientMemory),));
                }
                let listing = Listing {
                    entries: entries.into_iter(),
                    bytes,
                };
                let pushed = store.data_mut().table.push(listing);
                match pushed {
                    Ok(listing) => Ok((Ok(listing),)),
                    Err(e) => {
                        store.data_mut().limiter.release(bytes);
                        Err(e.into())
                    }
                }
            })
        },
    )?;
    types.func_wrap(
        "[method]directory-entry-stream.read-directory-entry",
        |mut store: StoreContextMut<'_, State>, (stream,): (Resource<Listing>,)| -> Next {
            let next = store.data_mut().table.get_mut(&stream)?.entries.next();
            Ok((match next {
                None => Ok(None),
                Some(Ok(entry)) => Ok(Some(entry)),
                Some(Err(e)) => Err(fs::Host::convert_error_code(
                    &mut store.data_mut().filesystem(),
                    e,
                )?),
            },))
        },
    )?;
    Ok(())
}

/// A stream call's answer to the guest: the host's stream error converted into the
/// guest's, as wasmtime-wasi does.
fn answer<T>(
    store: &mut StoreContextMut<'_, State>,
    result: Result<T, wasmtime_wasi_io::streams::StreamError>,
) -> wasmtime::Result<(Result<T, StreamError>,)> {
    Ok((match result {
        Ok(value) => Ok(value),
        Err(e) => Err(streams::Host::convert_stream_error(
            &mut store.data_mut().table,
            e,
        )?),
    },))
}

/// Charges a stream call that moved bytes (`moved` of what it returned), then answers.
/// Reads, skips and splices are charged after the fact, for what they moved; writes are
/// charged before, for what they were asked to move.
fn charged<T>(
    store: &mut StoreContextMut<'_, State>,
    result: Result<T, wasmtime_wasi_io::streams::StreamError>,
    moved: impl FnOnce(&T) -> usize,
) -> wasmtime::Result<(Result<T, StreamError>,)> {
    if let Ok(value) = &result {
        charge(store, cost(moved(value)))?;
    }
    answer(store, result)
}

/// A byte count from the guest as a length (saturating: a count above memory is charged
/// as the most there could be).
fn as_len(count: &u64) -> usize {
    usize::try_from(*count).unwrap_or(usize::MAX)
}

/// Stream reads and writes, charged by the bytes they move.
fn meter_streams(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    type Read = wasmtime::Result<(Result<Vec<u8>, StreamError>,)>;
    type Count = wasmtime::Result<(Result<u64, StreamError>,)>;
    type Done = wasmtime::Result<(Result<(), StreamError>,)>;
    let mut io = linker.instance(&format!("wasi:io/streams@{WASI}"))?;
    io.func_wrap(
        "[method]input-stream.read",
        |mut store: StoreContextMut<'_, State>,
         (stream, len): (Resource<DynInputStream>, u64)|
         -> Read {
            let read = HostInputStream::read(&mut store.data_mut().table, stream, len);
            charged(&mut store, read, Vec::len)
        },
    )?;
    io.func_wrap_async(
        "[method]input-stream.blocking-read",
        |mut store: StoreContextMut<'_, State>, (stream, len): (Resource<DynInputStream>, u64)| {
            Box::new(async move {
                let read =
                    HostInputStream::blocking_read(&mut store.data_mut().table, stream, len).await;
                let read: Read = charged(&mut store, read, Vec::len);
                read
            })
        },
    )?;
    io.func_wrap(
        "[method]input-stream.skip",
        |mut store: StoreContextMut<'_, State>,
         (stream, len): (Resource<DynInputStream>, u64)|
         -> Count {
            let skipped = HostInputStream::skip(&mut store.data_mut().table, stream, len);
            charged(&mut store, skipped, as_len)
        },
    )?;
    io.func_wrap_async(
        "[method]input-stream.blocking-skip",
        |mut store: StoreContextMut<'_, State>, (stream, len): (Resource<DynInputStream>, u64)| {
            Box::new(async move {
                let skipped =
                    HostInputStream::blocking_skip(&mut store.data_mut().table, stream, len).await;
                let skipped: Count = charged(&mut store, skipped, as_len);
                skipped
            })
        },
    )?;
    io.func_wrap(
        "[method]output-stream.write",
        |mut store: StoreContextMut<'_, State>,
         (stream, bytes): (Resource<DynOutputStream>, Vec<u8>)|
         -> Done {
            charge(&mut store, cost(bytes.len()))?;
            let written = HostOutputStream::write(&mut store.data_mut().table, stream, bytes);
            answer(&mut store, written)
        },
    )?;
    io.func_wrap_async(
        "[method]output-stream.blocking-write-and-flush",
        |mut store: StoreContextMut<'_, State>,
         (stream, bytes): (Resource<DynOutputStream>, Vec<u8>)| {
            Box::new(async move {
                charge(&mut store, cost(bytes.len()))?;
                let written = HostOutputStream::blocking_write_and_flush(
                    &mut store.data_mut().table,
                    stream,
                    bytes,
                )
                .await;
                let done: Done = answer(&mut store, written);
                done
            })
        },
    )?;
    io.func_wrap(
        "[method]output-stream.write-zeroes",
        |mut store: StoreContextMut<'_, State>,
         (stream, len): (Resource<DynOutputStream>, u64)|
         -> Done {
            charge(&mut store, cost(as_len(&len)))?;
            let written = HostOutputStream::write_zeroes(&mut store.data_mut().table, stream, len);
            answer(&mut store, written)
        },
    )?;
    io.func_wrap_async(
        "[method]output-stream.blocking-write-zeroes-and-flush",
        |mut store: StoreContextMut<'_, State>, (stream, len): (Resource<DynOutputStream>, u64)| {
            Box::new(async move {
                charge(&mut store, cost(as_len(&len)))?;
                let written = HostOutputStream::blocking_write_zeroes_and_flush(
                    &mut store.data_mut().table,
                    stream,
                    len,
                )
                .await;
                let done: Done = answer(&mut store, written);
                done
            })
        },
    )?;
    io.func_wrap(
        "[method]output-stream.splice",
        |mut store: StoreContextMut<'_, State>,
         (dest, src, len): (Resource<DynOutputStream>, Resource<DynInputStream>, u64)|
         -> Count {
            let spliced = HostOutputStream::splice(&mut store.data_mut().table, dest, src, len);
            charged(&mut store, spliced, as_len)
        },
    )?;
    io.func_wrap_async(
        "[method]output-stream.blocking-splice",
        |mut store: StoreContextMut<'_, State>,
         (dest, src, len): (Resource<DynOutputStream>, Resource<DynInputStream>, u64)| {
            Box::new(async move {
                let spliced =
                    HostOutputStream::blocking_splice(&mut store.data_mut().table, dest, src, len)
                        .await;
                let spliced: Count = charged(&mut store, spliced, as_len);
                spliced
            })
        },
    )?;
    Ok(())
}

/// Positional file reads and writes (`descriptor.read` / `write`), charged by the bytes
/// they move.
fn meter_files(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    let mut types = linker.instance(&format!("wasi:filesystem/types@{WASI}"))?;
    types.func_wrap_async(
        "[method]descriptor.read",
        |mut store: StoreContextMut<'_, State>,
         (fd, len, offset): (Resource<Descriptor>, Filesize, Filesize)| {
            Box::new(async move {
                let mut view = store.data_mut().filesystem();
                let read = HostDescriptor::read(&mut view, fd, len, offset).await;
                let read = match read {
                    Ok(read) => Ok(read),
                    Err(e) => Err(fs::Host::convert_error_code(&mut view, e)?),
                };
                if let Ok((bytes, _)) = &read {
                    charge(&mut store, cost(bytes.len()))?;
                }
                Ok((read,))
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.write",
        |mut store: StoreContextMut<'_, State>,
         (fd, bytes, offset): (Resource<Descriptor>, Vec<u8>, Filesize)| {
            Box::new(async move {
                charge(&mut store, cost(bytes.len()))?;
                if let Some(code) = store.data_mut().self_change_refused("write", fd.rep())? {
                    return Ok((Err(code),));
                }
                let mut view = store.data_mut().filesystem();
                let written = HostDescriptor::write(&mut view, fd, bytes, offset).await;
                Ok((match written {
                    Ok(n) => Ok(n),
                    Err(e) => Err(fs::Host::convert_error_code(&mut view, e)?),
                },))
            })
        },
    )?;
    Ok(())
}

/// `host.log` of every WIT version, charged per record and by its bytes.
fn meter_log(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    for version in super::WIT_VERSIONS {
        let mut host = linker.instance(&format!("hookhost:hook/host@{version}"))?;
        host.func_wrap(
            "log",
            |mut store: StoreContextMut<'_, State>,
             (level, message, fields): (Level, String, Vec<(String, String)>)|
             -> wasmtime::Result<()> {
                let bytes =
                    message.len() + fields.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
                charge(&mut store, FUEL_PER_LOG_RECORD.saturating_add(cost(bytes)))?;
                store.data_mut().record_log(level, &message, &fields);
                Ok(())
            },
        )?;
    }
    Ok(())
}

/// `get-random-bytes` and `get-insecure-random-bytes`, charged per byte asked for before
/// the host draws them (one call otherwise made the host draw up to
/// `MAX_RANDOM_BYTES` for the fuel of a call).
fn meter_random(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::random::{insecure, random};
    let mut secure = linker.instance(&format!("wasi:random/random@{WASI}"))?;
    secure.func_wrap(
        "get-random-bytes",
        |mut store: StoreContextMut<'_, State>, (len,): (u64,)| -> wasmtime::Result<(Vec<u8>,)> {
            charge(&mut store, len.saturating_mul(FUEL_PER_BYTE))?;
            Ok((random::Host::get_random_bytes(
                store.data_mut().wasi.random(),
                len,
            )?,))
        },
    )?;
    let mut weak = linker.instance(&format!("wasi:random/insecure@{WASI}"))?;
    weak.func_wrap(
        "get-insecure-random-bytes",
        |mut store: StoreContextMut<'_, State>, (len,): (u64,)| -> wasmtime::Result<(Vec<u8>,)> {
            charge(&mut store, len.saturating_mul(FUEL_PER_BYTE))?;
            let ctx = store.data_mut().wasi.random();
            Ok((insecure::Host::get_insecure_random_bytes(ctx, len)?,))
        },
    )?;
    Ok(())
}

/// Defines every wasi-http function and resource that `component` imports as one that
/// traps with [`HttpNotGranted`]: the linker of a hook without HTTP grants. The
/// component still links (JavaScript components import `wasi:http/types` whether they
/// use it or not), but nothing of wasi-http runs, so none of its resources can hold
/// host memory.
pub fn stub_http(
    linker: &mut Linker<State>,
    engine: &wasmtime::Engine,
    component: &wasmtime::component::Component,
) -> wasmtime::Result<()> {
    let ty = component.component_type();
    for (name, item) in ty.imports(engine) {
        if !name.starts_with("wasi:http/") {
            continue;
        }
        let ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        let mut defined = linker.instance(name)?;
        for (export, item) in instance.exports(engine) {
            match item.ty {
                ComponentItem::ComponentFunc(_) => {
                    let called = format!("{name}#{export}");
                    defined.func_new(export, move |_, _, _, _| {
                        Err(wasmtime::Error::new(HttpNotGranted(called.clone())))
                    })?;
                }
                ComponentItem::Resource(_) => {
                    // wasi-http's own resources stand in as `NoHttp`; those it takes
                    // from wasi:io (`use wasi:io/…`) must be wasi:io's very types.
                    let ty = match export {
                        "input-stream" => ResourceType::host::<DynInputStream>(),
                        "output-stream" => ResourceType::host::<DynOutputStream>(),
                        "pollable" => ResourceType::host::<DynPollable>(),
                        "io-error" | "error" => {
                            ResourceType::host::<wasmtime_wasi_io::streams::Error>()
                        }
                        _ => ResourceType::host::<NoHttp>(),
                    };
                    defined.resource(export, ty, |_, _| Ok(()))?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}
