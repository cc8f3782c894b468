//! Scheduling priority of host threads that work beside the GPU.

/// Lowers the calling thread's scheduling priority by `nice` (a nice value
/// added to the process's; on Linux for this thread alone) and says
/// whether it could. For threads whose work is not on the GPU's critical
/// path (blocks' host work while another block has the GPU), so that when
/// every core is busy the host's share of the GPU's work (copies through
/// pinned memory on threads left at the process's priority) still gets
/// the cores at once. Elsewhere than on Linux, nothing (false).
pub fn lower_thread_priority(nice: i32) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getpriority and setpriority only read their arguments;
        // with PRIO_PROCESS and 0 they act on the calling thread on Linux
        // (each thread is a task with its own nice value).
        unsafe {
            let now = libc::getpriority(libc::PRIO_PROCESS, 0);
            libc::setpriority(libc::PRIO_PROCESS, 0, now.saturating_add(nice.max(0))) == 0
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = nice;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::lower_thread_priority;

    /// The thread's nice value goes up by the amount, and only that
    /// thread's (and the threads it starts).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_lowered_thread_keeps_the_others_priority() {
        // SAFETY: getpriority only reads its arguments.
        let before = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let (lowered, started) = std::thread::spawn(move || {
            assert!(lower_thread_priority(3));
            // SAFETY: as above.
            let lowered = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            // A thread it starts inherits its priority.
            // SAFETY: as above.
            let started = std::thread::spawn(|| unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }).join().unwrap();
            (lowered, started)
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + 3).min(19));
        assert_eq!(started, lowered);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }, before);
    }
}
