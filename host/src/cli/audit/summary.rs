//! `hookhost audit --summary`: the entries the filters keep, counted per day and per hook,
//! with the slowest hooks and wasm hooks' fuel and peak memory as percentiles. Every name
//! from the log (hook ids, sources, types, days) is escaped and cut to its column before
//! the terminal shows it.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

use hookhost::text::escape;

/// The most days, and hooks, given a row each; the rest are counted in one line (a log
/// that names millions of hooks still prints a bounded table).
const MAX_ROWS: usize = 10_000;

/// Rows of the slowest-hooks table.
const SLOWEST: usize = 10;

/// The longest duration a hook can have run (a day: far beyond any timeout, within what a
/// table cell shows); a line claiming more, negative or not a number is edited or corrupt,
/// and its duration is left out of the percentiles rather than widening the table.
pub(super) const MAX_DURATION_MS: f64 = 86_400_000.0;

/// The merged decisions, in the order of the table's columns.
const DECISIONS: [&str; 6] = ["none", "allow", "ask", "defer", "deny", "block"];

/// A hook's statuses, in the order of the table's columns.
const STATUSES: [&str; 6] = ["ok", "blocked", "failed", "timeout", "skipped", "async"];

/// One day's counts.
#[derive(Debug, Default)]
struct Day {
    events: u64,
    decisions: [u64; DECISIONS.len()],
    hook_runs: u64,
    /// Hooks that failed or timed out.
    failures: u64,
}

/// One hook's counts and measures.
#[derive(Debug, Default)]
struct HookStats {
    source: String,
    kind: String,
    statuses: [u64; STATUSES.len()],
    runs: u64,
    durations_ms: Vec<f64>,
    fuel: Vec<u64>,
    memory: Vec<u64>,
}

/// The counts of the entries added so far.
#[derive(Debug, Default)]
pub struct Summary {
    /// `--hook`: only this hook's rows.
    only_hook: Option<String>,
    entries: u64,
    first: Option<String>,
    last: Option<String>,
    days: BTreeMap<String, Day>,
    hooks: BTreeMap<String, HookStats>,
    /// Entries, and hook runs, past [`MAX_ROWS`] days or hooks: counted, not given rows.
    days_over: u64,
    hooks_over: u64,
}

impl Summary {
    /// An empty summary; `only_hook` limits the hook rows to that hook.
    pub fn new(only_hook: Option<String>) -> Summary {
        Summary {
            only_hook,
            ..Summary::default()
        }
    }

    /// Counts one entry.
    pub fn add(&mut self, entry: &Value) {
        self.entries += 1;
        let time = entry["time"]
            .as_str()
            .filter(|t| super::when::is_log_time(t));
        if let Some(time) = time {
            if self.first.as_deref().is_none_or(|f| time < f) {
                self.first = Some(time.to_string());
            }
            if self.last.as_deref().is_none_or(|l| time > l) {
                self.last = Some(time.to_string());
            }
        }
        let day_key = time.map_or("(no time)", |t| &t[..10]).to_string();
        let day = if self.days.contains_key(&day_key) || self.days.len() < MAX_ROWS {
            Some(self.days.entry(day_key).or_default())
        } else {
            self.days_over += 1;
            None
        };
        let hooks = entry["hooks"].as_array().map_or(&[][..], Vec::as_slice);
        if let Some(day) = day {
            day.events += 1;
            let decision = entry["decision"].as_str().unwrap_or("");
            if let Some(i) = DECISIONS.iter().position(|d| *d == decision) {
                day.decisions[i] += 1;
            }
            day.hook_runs += hooks.len() as u64;
            day.failures += hooks
                .iter()
                .filter(|h| matches!(h["status"].as_str(), Some("failed" | "timeout")))
                .count() as u64;
        }
        for hook in hooks {
            let id = hook["id"].as_str().unwrap_or("(no id)");
            if self.only_hook.as_deref().is_some_and(|only| only != id) {
                continue;
            }
            if !self.hooks.contains_key(id) && self.hooks.len() >= MAX_ROWS {
                self.hooks_over += 1;
                continue;
            }
            let stats = self.hooks.entry(id.to_string()).or_default();
            if stats.runs == 0 {
                stats.source = hook["source"].as_str().unwrap_or("-").to_string();
                stats.kind = hook["type"].as_str().unwrap_or("-").to_string();
            }
            stats.runs += 1;
            let status = hook["status"].as_str().unwrap_or("");
            if let Some(i) = STATUSES.iter().position(|s| *s == status) {
                stats.statuses[i] += 1;
            }
            if let Some(ms) = hook["durationMs"]
                .as_f64()
                .filter(|ms| (0.0..=MAX_DURATION_MS).contains(ms))
            {
                stats.durations_ms.push(ms);
            }
            if let Some(fuel) = hook["fuel"].as_u64() {
                stats.fuel.push(fuel);
            }
            if let Some(bytes) = hook["memoryBytes"].as_u64() {
                stats.memory.push(bytes);
            }
        }
    }

    /// The tables, for a terminal.
    pub fn table(&mut self) -> String {
        let mut out = String::new();
        let span = match (&self.first, &self.last) {
            (Some(first), Some(last)) => format!(", {first} to {last}"),
            _ => String::new(),
        };
        let _ = writeln!(out, "{} entries{span}", self.entries);
        if self.entries == 0 {
            return out;
        }
        self.days_table(&mut out);
        self.hooks_table(&mut out);
        self.slowest_table(&mut out);
        self.wasm_table(&mut out);
        out
    }

    fn days_table(&self, out: &mut String) {
        let _ = write!(out, "\n{:<10} {:>8}", "DAY (UTC)", "EVENTS");
        for d in DECISIONS {
            let _ = write!(out, " {:>7}", d.to_uppercase());
        }
        let _ = writeln!(out, " {:>9} {:>8}", "HOOK RUNS", "FAILURES");
        for (day, c) in &self.days {
            let _ = write!(out, "{:<10} {:>8}", cell(day, 10), c.events);
            for n in c.decisions {
                let _ = write!(out, " {n:>7}");
            }
            let _ = writeln!(out, " {:>9} {:>8}", c.hook_runs, c.failures);
        }
        if self.days_over > 0 {
            let _ = writeln!(out, "(and {} entries of other days)", self.days_over);
        }
    }

    fn hooks_table(&self, out: &mut String) {
        let _ = write!(
            out,
            "\n{:<32} {:<8} {:<8} {:>7}",
            "HOOK", "SOURCE", "TYPE", "RUNS"
        );
        for s in STATUSES {
            let _ = write!(out, " {:>7}", s.to_uppercase());
        }
        out.push('\n');
        let mut rows: Vec<_> = self.hooks.iter().collect();
        rows.sort_by(|a, b| b.1.runs.cmp(&a.1.runs).then(a.0.cmp(b.0)));
        for (id, h) in rows {
            let _ = write!(
                out,
                "{:<32} {:<8} {:<8} {:>7}",
                cell(id, 32),
                cell(&h.source, 8),
                cell(&h.kind, 8),
                h.runs
            );
            for n in h.statuses {
                let _ = write!(out, " {n:>7}");
            }
            out.push('\n');
        }
        if self.hooks_over > 0 {
            let _ = writeln!(out, "(and {} runs of other hooks)", self.hooks_over);
        }
    }

    fn slowest_table(&mut self, out: &mut String) {
        let mut rows: Vec<(&String, [f64; 4], usize)> = self
            .hooks
            .iter_mut()
            .filter(|(_, h)| !h.durations_ms.is_empty())
            .map(|(id, h)| {
                h.durations_ms.sort_by(f64::total_cmp);
                (id, percentiles(&h.durations_ms), h.durations_ms.len())
            })
            .collect();
        if rows.is_empty() {
            return;
        }
        rows.sort_by(|a, b| b.1[1].total_cmp(&a.1[1]).then(a.0.cmp(b.0)));
        let _ = writeln!(
            out,
            "\nSLOWEST HOOKS (wall time, ms; by p95)\n{:<32} {:>7} {:>9} {:>9} {:>9} {:>9}",
            "HOOK", "TIMED", "P50", "P95", "P99", "MAX"
        );
        for (id, p, timed) in rows.into_iter().take(SLOWEST) {
            let _ = writeln!(
                out,
                "{:<32} {timed:>7} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                cell(id, 32),
                p[0],
                p[1],
                p[2],
                p[3]
            );
        }
    }

    fn wasm_table(&mut self, out: &mut String) {
        let mut header = false;
        for (id, h) in &mut self.hooks {
            if h.fuel.is_empty() && h.memory.is_empty() {
                continue;
            }
            if !header {
                header = true;
                let _ = writeln!(
                    out,
                    "\nWASM HOOKS: FUEL AND PEAK MEMORY (p50 / p95 / p99 / max)\n{:<32} {:>7} {:>47} {:>39}",
                    "HOOK", "CALLS", "FUEL", "MEMORY"
                );
            }
            h.fuel.sort_unstable();
            h.memory.sort_unstable();
            let fuel = quartet(&h.fuel, |n| n.to_string());
            let memory = quartet(&h.memory, bytes);
            let _ = writeln!(
                out,
                "{:<32} {:>7} {fuel:>47} {memory:>39}",
                cell(id, 32),
                h.fuel.len().max(h.memory.len()),
            );
        }
    }
}

/// p50, p95, p99 and the maximum of sorted values (nearest rank).
fn percentiles<T: Copy>(sorted: &[T]) -> [T; 4] {
    let rank = |p: usize| sorted[(sorted.len() * p).div_ceil(100).max(1) - 1];
    [rank(50), rank(95), rank(99), sorted[sorted.len() - 1]]
}

/// `p50 / p95 / p99 / max` of sorted values, each shown by `show`; `-` when none.
fn quartet(sorted: &[u64], show: impl Fn(u64) -> String) -> String {
    if sorted.is_empty() {
        return "-".into();
    }
    percentiles(sorted).map(show).join(" / ")
}

/// Bytes in binary units: `512 B`, `1.5 MiB`.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A name from the log in a column of `width` characters: escaped (no control or
/// reordering character reaches the terminal) and cut with `…` when longer.
fn cell(text: &str, width: usize) -> String {
    let escaped = escape(text);
    if escaped.chars().count() <= width {
        return escaped.into_owned();
    }
    let mut cut: String = escaped.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentiles(&values), [50, 95, 99, 100]);
        assert_eq!(percentiles(&[7u64]), [7, 7, 7, 7]);
        assert_eq!(percentiles(&[1u64, 2]), [1, 2, 2, 2]);
    }

    #[test]
    fn names_are_escaped_and_cut_to_their_column() {
        assert_eq!(cell("a\u{1b}[2Jb", 32), r"a\x1b[2Jb");
        let long = cell(&"x".repeat(100), 8);
        assert_eq!((long.chars().count(), long.ends_with('…')), (8, true));
    }

    #[test]
    fn entries_are_counted_per_day_and_per_hook() {
        let mut summary = Summary::new(None);
        let hook = |id: &str, status: &str, ms: f64| {
            json!({"id": id, "source": "project", "type": "wasm", "status": status,
                   "durationMs": ms, "fuel": 1000, "memoryBytes": 65536})
        };
        summary.add(
            &json!({"time": "2026-12-01T10:00:00.000Z", "decision": "deny",
            "hooks": [hook("guard", "blocked", 3.0), hook("lint", "ok", 1.0)]}),
        );
        summary.add(
            &json!({"time": "2026-12-02T10:00:00.000Z", "decision": "none",
            "hooks": [hook("guard", "failed", 9.0)]}),
        );
        // Durations no hook can have (edited or corrupt lines) do not reach the table.
        summary.add(
            &json!({"time": "2026-12-02T11:00:00.000Z", "decision": "none",
            "hooks": [hook("lint", "ok", 1e308), hook("lint", "ok", -5.0)]}),
        );
        let table = summary.table();
        assert!(
            table.lines().all(|l| l.len() < 200) && !table.contains("e308"),
            "{table}"
        );
        assert!(
            table.starts_with("3 entries, 2026-12-01T10:00:00.000Z to "),
            "{table}"
        );
        let row = |start: &str| {
            table
                .lines()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no row {start}: {table}"))
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        // Day, events, none allow ask defer deny block, hook runs, failures.
        assert_eq!(
            row("2026-12-01"),
            ["2026-12-01", "1", "0", "0", "0", "0", "1", "0", "2", "0"]
        );
        assert_eq!(
            row("2026-12-02"),
            ["2026-12-02", "2", "2", "0", "0", "0", "0", "0", "3", "1"]
        );
        // Hook, source, type, runs, ok blocked failed timeout skipped async.
        assert_eq!(
            row("guard ")[..10],
            [
                "guard", "project", "wasm", "2", "0", "1", "1", "0", "0", "0"
            ]
        );
        assert!(
            table.contains("SLOWEST HOOKS") && table.contains("64.0 KiB"),
            "{table}"
        );
    }
}
