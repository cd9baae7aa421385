//! The times of `hookhost audit --since/--until`, as the text the log writes
//! (`2026-12-01T09:30:00.000Z`, UTC, fixed width), so that an entry's time compares with
//! them as text.

use std::time::{Duration, SystemTime};

/// The length of a time as the log writes it: `2026-12-01T09:30:00.000Z`.
const LOG_TIME_LEN: usize = 24;

/// Whether `time` has the shape of a time the log writes (digits where digits go).
pub fn is_log_time(time: &str) -> bool {
    let shape = b"dddd-dd-ddTdd:dd:dd.dddZ";
    time.len() == LOG_TIME_LEN
        && time.bytes().zip(shape).all(|(b, &s)| match s {
            b'd' => b.is_ascii_digit(),
            s => b == s,
        })
}

/// `--since`/`--until`: a UTC date (`2026-12-01`), a date and time (`2026-12-01T09:30`,
/// `…T09:30:15`, `…T09:30:15.250`, with or without `Z`, `T` or a space), or an age before
/// now (`90s`, `30m`, `12h`, `7d`); as the log's text.
pub fn parse(arg: &str) -> Result<String, String> {
    if let Some(age) = age(arg) {
        let then = SystemTime::now()
            .checked_sub(age)
            .ok_or_else(|| format!("`{arg}` is before 1970"))?;
        return Ok(hookhost::audit::rfc3339(then));
    }
    let text = arg.strip_suffix('Z').unwrap_or(arg).replacen(' ', "T", 1);
    // Complete what is given with the start of the day, minute, second.
    let full = "0000-01-01T00:00:00.000";
    if text.len() < 10 || text.len() > full.len() {
        return Err(format!(
            "`{arg}` is not a time: give a UTC date (2026-12-01), a date and time \
             (2026-12-01T09:30[:00[.000]][Z]) or an age (90s, 30m, 12h, 7d)"
        ));
    }
    let time = format!("{text}{}Z", &full[text.len()..]);
    let in_range =
        |from: usize, to: usize, max: u32| time[from..to].parse::<u32>().is_ok_and(|n| n <= max);
    let cut_cleanly = matches!(text.len(), 10 | 16 | 19 | 23);
    if !cut_cleanly
        || !is_log_time(&time)
        || !in_range(5, 7, 12)
        || !in_range(8, 10, 31)
        || !in_range(11, 13, 23)
        || !in_range(14, 16, 59)
        || !in_range(17, 19, 60)
    {
        return Err(format!(
            "`{arg}` is not a time: give a UTC date (2026-12-01), a date and time \
             (2026-12-01T09:30[:00[.000]][Z]) or an age (90s, 30m, 12h, 7d)"
        ));
    }
    Ok(time)
}

/// `90s`, `30m`, `12h`, `7d` as a duration.
fn age(arg: &str) -> Option<Duration> {
    let unit = arg.chars().last()?;
    let digits = &arg[..arg.len() - unit.len_utf8()];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let secs = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return None,
    };
    Some(Duration::from_secs(n.checked_mul(secs)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_completed_to_the_logs_shape() {
        for (arg, want) in [
            ("2026-12-01", "2026-12-01T00:00:00.000Z"),
            ("2026-12-01T09:30", "2026-12-01T09:30:00.000Z"),
            ("2026-12-01 09:30:15", "2026-12-01T09:30:15.000Z"),
            ("2026-12-01T09:30:15.250Z", "2026-12-01T09:30:15.250Z"),
        ] {
            assert_eq!(parse(arg).unwrap(), want, "{arg}");
        }
        for bad in [
            "",
            "yesterday",
            "2026-1-1",
            "2026-13-01",
            "2026-12-01T9",
            "7w",
            "-5m",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let hour_ago = parse("1h").unwrap();
        assert!(is_log_time(&hour_ago) && hour_ago < hookhost::audit::rfc3339(SystemTime::now()));
    }
}
