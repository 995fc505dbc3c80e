//! CPU time, memory and open files of a process, from Linux `/proc`.
//!
//! `/proc/<pid>/stat` fields 14 and 15 (utime, stime) are in clock ticks
//! (`sysconf(_SC_CLK_TCK)`, 100 on every mainstream Linux build); VmHWM in
//! `/proc/<pid>/status` is the peak resident set, VmRSS the current one;
//! `/proc/<pid>/fd` has one entry per open descriptor. Elsewhere these read
//! as `None`: the load report says so, `/metrics` leaves the series out.

use std::time::Instant;

/// Linux's USER_HZ: the unit of utime/stime in /proc/<pid>/stat.
const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

/// CPU seconds (user + system) a process has used so far.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    stat_cpu_seconds(&format!("/proc/{pid}/stat"))
}

/// CPU seconds one thread of this process has used so far (`tid` as
/// [`current_thread_id`] gave it).
pub fn thread_cpu_seconds(tid: u32) -> Option<f64> {
    stat_cpu_seconds(&format!("/proc/self/task/{tid}/stat"))
}

/// The kernel's id of the calling thread (field 1 of its own stat file).
pub fn current_thread_id() -> Option<u32> {
    let text = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// utime + stime of a `stat` file (process or thread: same layout).
fn stat_cpu_seconds(path: &str) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    // The command name (field 2) may contain spaces; fields restart after ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')' the first field is field 3 (state): utime is 14, stime 15.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / CLOCK_TICKS_PER_SECOND)
}

/// Seconds on a CPU of every live thread of a process, to the nanosecond
/// (field 1 of each `/proc/<pid>/task/<tid>/schedstat`): precise enough
/// for a process that uses a thousandth of a core, where utime and stime
/// count 10 ms ticks. Threads that have exited are not counted.
pub fn scheduled_seconds(pid: u32) -> Option<f64> {
    let mut nanos: u64 = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(text) = std::fs::read_to_string(task.ok()?.path().join("schedstat")) else {
            continue;
        };
        nanos += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(nanos as f64 / 1e9)
}

/// Times the live threads of a process went to sleep of their own accord
/// so far (voluntary context switches): one per wake-up of a thread that
/// blocks when it has nothing to do.
pub fn voluntary_switches(pid: u32) -> Option<u64> {
    let mut switches = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(text) = std::fs::read_to_string(task.ok()?.path().join("status")) else {
            continue;
        };
        switches += text
            .lines()
            .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(switches)
}

/// A `/proc/<pid>/status` value in KiB (`VmHWM`, `VmRSS`).
pub fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Descriptors the process has open (sockets included).
pub fn open_files(pid: u32) -> Option<u64> {
    let entries = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(entries.count() as u64)
}

/// What `/metrics` shows of this process, read when scraped.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessSample {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub open_files: Option<u64>,
    /// The soft limit on open descriptors (the node raises it to the hard
    /// one at start).
    pub max_open_files: Option<u64>,
}

impl ProcessSample {
    /// Reads this process now: three small `/proc` files and a directory
    /// listing of its descriptors.
    pub fn of_this_process() -> ProcessSample {
        let pid = std::process::id();
        ProcessSample {
            cpu_seconds: cpu_seconds(pid),
            resident_bytes: status_kib(pid, "VmRSS").map(|kib| kib * 1024),
            open_files: open_files(pid),
            max_open_files: rlimit::Resource::NOFILE.get().ok().map(|(soft, _)| soft),
        }
    }
}

/// CPU use of a process over an interval.
#[derive(Debug, Clone, Copy)]
pub struct CpuMark {
    pid: u32,
    cpu: Option<f64>,
    at: Instant,
}

impl CpuMark {
    pub fn start(pid: u32) -> CpuMark {
        CpuMark {
            pid,
            cpu: cpu_seconds(pid),
            at: Instant::now(),
        }
    }

    /// Cores used on average since `start` (1.0 = one core busy).
    pub fn cores(&self) -> Option<f64> {
        let elapsed = self.at.elapsed().as_secs_f64();
        let used = cpu_seconds(self.pid)? - self.cpu?;
        (elapsed > 0.0).then(|| used / elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_peak_and_cpu_time() {
        let pid = std::process::id();
        assert!(status_kib(pid, "VmHWM").is_some_and(|kib| kib > 0));
        assert!(cpu_seconds(pid).is_some());
        assert_eq!(status_kib(pid, "NoSuchKey"), None);
    }

    #[test]
    fn scheduled_time_and_wake_ups_grow_with_a_threads_work_and_sleeps() {
        let pid = std::process::id();
        let (cpu, switches) = (
            scheduled_seconds(pid).unwrap(),
            voluntary_switches(pid).unwrap(),
        );
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        for _ in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(scheduled_seconds(pid).unwrap() > cpu);
        assert!(voluntary_switches(pid).unwrap() >= switches + 3);
        assert_eq!(scheduled_seconds(u32::MAX), None);
    }

    #[test]
    fn this_process_sample_counts_a_file_it_opens() {
        let before = ProcessSample::of_this_process();
        assert!(before
            .resident_bytes
            .is_some_and(|bytes| bytes > 1024 * 1024));
        assert!(before.cpu_seconds.is_some_and(|cpu| cpu >= 0.0));
        assert!(before.max_open_files.is_some_and(|max| max >= 16));
        let open = before.open_files.unwrap();
        assert!(open >= 3, "stdin, stdout, stderr at least: {open}");
        // Other tests of this binary open files too: hold more than they
        // could close meanwhile and see the count rise by at least half.
        let held: Vec<std::fs::File> = (0..64)
            .map(|_| std::fs::File::open("/proc/self/stat").unwrap())
            .collect();
        let during = open_files(std::process::id()).unwrap();
        assert!(during + 32 >= open + 64, "{open} then {during}");
        drop(held);
    }

    #[test]
    fn a_busy_thread_is_charged_its_own_cpu_time() {
        let tid = current_thread_id().unwrap();
        assert_ne!(tid, 0);
        let before = thread_cpu_seconds(tid).unwrap();
        // Spin until the kernel has charged two clock ticks (bounded: a
        // stat file that never moves fails the assertion, not the clock).
        let started = Instant::now();
        let mut x = 0u64;
        while thread_cpu_seconds(tid).unwrap() < before + 0.02 && started.elapsed().as_secs() < 20 {
            for i in 0..100_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
        assert!(thread_cpu_seconds(tid).unwrap() >= before + 0.02);
        // Another thread's id names another stat file.
        let other = std::thread::spawn(current_thread_id)
            .join()
            .unwrap()
            .unwrap();
        assert_ne!(other, tid);
    }
}
