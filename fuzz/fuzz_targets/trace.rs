//! The trace reader (`dovetail replay`): any bytes are events or an error naming a line, in
//! both modes, and every event read is inside the trace horizon and in time order.
#![no_main]

use dovetail_ingest::trace::{read_trace, MAX_TRACE_MS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for skip_bad in [false, true] {
        if let Ok(trace) = read_trace("fuzz.jsonl", data, skip_bad) {
            let mut last = 0;
            for e in &trace.events {
                assert!(e.t <= MAX_TRACE_MS, "t={} past the horizon", e.t);
                assert!(e.t >= last, "t={} after t={last}", e.t);
                last = e.t;
            }
        }
    }
});
