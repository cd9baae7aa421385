//! Resources held on the host and never dropped: wasi-http `fields` and outgoing
//! bodies, and pollables.

use crate::context;
use crate::exports::hookhost::hook::hook::Response;

/// `n` fields resources of `appends` × 4 KiB each (30: ~120 KiB), never dropped: host
/// memory the plugin's own memory limit does not see.
pub fn leak_fields(n: usize, appends: usize) -> Result<Response, String> {
    use wasip2::http::types::Fields;
    let value = vec![b'v'; 4 * 1024];
    let mut made = 0usize;
    for i in 0..n {
        let fields = Fields::new();
        for j in 0..appends {
            if fields.append(&format!("h{j}"), &value).is_err() {
                break;
            }
        }
        std::mem::forget(fields);
        made = i + 1;
    }
    Ok(context(format!("leaked {made} fields")))
}

/// Holds `hold_mb` MiB of linear memory, then makes `n` outgoing request bodies, each
/// written up to what its stream takes without a reader (wasi-http buffers it on the
/// host), never dropped, until the host refuses one; says how many bytes it parked.
pub fn hoard_bodies(n: usize, hold_mb: usize) -> Result<Response, String> {
    use wasip2::http::types::{Fields, OutgoingRequest};
    std::mem::forget(std::hint::black_box(vec![1u8; hold_mb << 20]));
    let chunk = vec![b'b'; 1 << 20];
    let (mut bodies, mut bytes) = (0usize, 0usize);
    for _ in 0..n {
        let request = OutgoingRequest::new(Fields::new());
        let Ok(body) = request.body() else { break };
        let Ok(stream) = body.write() else { break };
        while let Ok(room) = stream.check_write() {
            let room = room.min(1 << 20) as usize;
            if room == 0 || stream.write(&chunk[..room]).is_err() {
                break;
            }
            bytes += room;
        }
        std::mem::forget((stream, body, request));
        bodies += 1;
    }
    Ok(context(format!("parked {bodies} bodies of {bytes} bytes")))
}

/// Pollables of sleeps, never dropped: entries in the host's resource table.
pub fn leak_pollables(n: usize) -> Result<Response, String> {
    for _ in 0..n {
        std::mem::forget(wasip2::clocks::monotonic_clock::subscribe_duration(1 << 40));
    }
    Ok(context(format!("leaked {n} pollables")))
}
