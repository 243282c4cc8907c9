//! Two jobs in one process, on one service, run at the same time: each job's reports (rows
//! trained, input rows skipped) hold its own work only.

use std::collections::HashMap;

use angel_ps_service::{Standalone, StandaloneConfig};
use angel_sql::job::Job;
use datafusion::prelude::SessionContext;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_jobs_in_one_process_keep_their_own_reports() {
    let service = Standalone::start(StandaloneConfig::new(1)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let clean: String = (0..200)
        .map(|i| format!("{} 1:1 {}:1\n", i % 2, 2 + i % 5))
        .collect();
    let dirty = format!("{clean}1 x:1\n0 2:1 3\n");
    std::fs::write(dir.path().join("clean.libsvm"), &clean).unwrap();
    std::fs::write(dir.path().join("dirty.libsvm"), &dirty).unwrap();
    let job = |file: &str, model: &str| {
        let text = format!(
            "CREATE TABLE t AS SELECT * FROM read_libsvm('{}', 'skip');\n\
             CREATE MODEL {model} OPTIONS (kind = 'logistic', dim = 8, epochs = 3, \
             batch_size = 16) AS SELECT label, idx, val FROM t;",
            dir.path().join(file).display()
        );
        (
            Job::new(SessionContext::new(), &service.master_addr()),
            text,
        )
    };
    let (a, a_text) = job("dirty.libsvm", "a");
    let (b, b_text) = job("clean.libsvm", "b");
    let vars = HashMap::new();
    let (a_reports, b_reports) = tokio::join!(
        a.run("a.sql", &a_text, &vars, |_| {}),
        b.run("b.sql", &b_text, &vars, |_| {})
    );
    let (a_reports, b_reports) = (a_reports.unwrap(), b_reports.unwrap());

    assert_eq!(a_reports[0].skipped.count, 2, "job a read two bad lines");
    assert_eq!(a_reports[0].skipped.first[0].line, 201);
    assert!(
        b_reports.iter().all(|r| r.skipped.count == 0),
        "job b skipped nothing"
    );
    // Each job trained 200 rows for 3 epochs, and saw only its own progress.
    assert_eq!(a.reports().progress.snapshot().0, 600);
    assert_eq!(b.reports().progress.snapshot().0, 600);
    service.shutdown().await.unwrap();
}
