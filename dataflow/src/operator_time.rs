//! Where an epoch's time went, by operator: timely's own scheduling log, summed per operator
//! between two epochs and written to the debug log when an epoch was slow.
//!
//! A CPU profile of the engine shows functions (a spine merge, a hash) but not which standing
//! query they ran for; timely knows which operator it scheduled and for how long. Off unless
//! the `dovetail_dataflow::operator_time` target logs at debug level, since every operator
//! schedule then costs an event.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;
use timely::logging::{StartStop, TimelyEvent, TimelyEventBuilder};

/// An epoch slower than this has its operators' times logged.
const SLOW_EPOCH: Duration = Duration::from_millis(50);

/// How many operators a slow epoch's line names.
const TOP: usize = 6;

#[derive(Default)]
struct Times {
    /// Operator id to its name and address (the address tells two `Map`s apart).
    names: HashMap<usize, (String, Vec<usize>)>,
    /// Operators scheduled and not yet stopped, with when they started.
    started: HashMap<usize, Duration>,
    /// Time spent per operator since the last epoch was reported.
    spent: HashMap<usize, Duration>,
}

/// The per-operator times of one worker, while the debug target is on.
pub(crate) struct OperatorTime {
    times: Rc<RefCell<Times>>,
}

impl OperatorTime {
    /// Starts collecting on this worker when the debug target is on; `None` otherwise.
    pub(crate) fn install(worker: &mut timely::worker::Worker) -> Option<Self> {
        if !tracing::enabled!(target: "dovetail_dataflow::operator_time", tracing::Level::DEBUG) {
            return None;
        }
        let times: Rc<RefCell<Times>> = Rc::default();
        let sink = Rc::clone(&times);
        let mut register = worker.log_register()?;
        register.insert::<TimelyEventBuilder, _>("timely", move |_now, data| {
            let Some(data) = data else { return };
            let mut t = sink.borrow_mut();
            for (at, event) in data.iter() {
                match event {
                    TimelyEvent::Operates(op) => {
                        t.names.insert(op.id, (op.name.clone(), op.addr.clone()));
                    }
                    TimelyEvent::Schedule(s) => match s.start_stop {
                        StartStop::Start => {
                            t.started.insert(s.id, *at);
                        }
                        StartStop::Stop => {
                            if let Some(from) = t.started.remove(&s.id) {
                                *t.spent.entry(s.id).or_default() += at.saturating_sub(from);
                            }
                        }
                    },
                    _ => {}
                }
            }
        });
        Some(OperatorTime { times })
    }

    /// Ends an epoch that took `took`: when slow, logs the operators that spent most of it.
    /// The counts start over either way.
    pub(crate) fn epoch_done(
        &self,
        worker: &mut timely::worker::Worker,
        epoch: u64,
        took: Duration,
    ) {
        if let Some(mut register) = worker.log_register() {
            register.flush();
        }
        let mut t = self.times.borrow_mut();
        let spent = std::mem::take(&mut t.spent);
        if took < SLOW_EPOCH {
            return;
        }
        // The dataflow itself is scheduled around its operators: its time is theirs.
        let mut by_time: Vec<(usize, Duration)> = spent
            .into_iter()
            .filter(|(id, _)| t.names.get(id).is_some_and(|(_, addr)| addr.len() > 1))
            .collect();
        by_time.sort_by_key(|(_, spent)| std::cmp::Reverse(*spent));
        let scheduled: Duration = by_time.iter().map(|(_, d)| *d).sum();
        let top: Vec<String> = by_time
            .iter()
            .take(TOP)
            .map(|(id, d)| {
                let (name, addr) = t
                    .names
                    .get(id)
                    .map(|(n, a)| (n.as_str(), a.as_slice()))
                    .unwrap_or(("?", &[]));
                format!("{name}{addr:?} {:.1} ms", d.as_secs_f64() * 1e3)
            })
            .collect();
        tracing::debug!(
            target: "dovetail_dataflow::operator_time",
            epoch,
            took_ms = took.as_secs_f64() * 1e3,
            scheduled_ms = scheduled.as_secs_f64() * 1e3,
            top = %top.join(", "),
            "slow epoch by operator"
        );
    }
}
