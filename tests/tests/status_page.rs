//! The master's status page (`--http`), loaded in a real headless Chromium while a job trains
//! and after it: the plot shows the finished epochs, with the values the job printed.
//!
//! `.ci/run` installs Debian's `chromium`. Where no browser is installed the test says so on
//! the terminal (past the test harness's capture) and checks nothing.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use angel_tests::{finished, json_lines, repo, spawn, start_job};
use serde_json::Value;

/// Browsers tried, in order.
const BROWSERS: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];
/// Longest a browser may take to load and render the page.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(60);

/// The first of [`BROWSERS`] on the PATH.
fn browser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| BROWSERS.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// The page's DOM after its script ran (`--dump-dom`), from a headless browser with a profile
/// of its own.
fn rendered(browser: &PathBuf, url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the browser starts");
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let deadline = Instant::now() + BROWSER_TIMEOUT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{} did not render {url} within {BROWSER_TIMEOUT:?}",
                browser.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// The (epoch, value) points the page plotted for `series` in `model`'s charts, by epoch.
fn plotted(dom: &str, model: &str, series: &str) -> Vec<(u32, f64)> {
    let attr = |circle: &str, name: &str| {
        let start = circle.find(&format!("{name}=\""))? + name.len() + 2;
        let len = circle[start..].find('"')?;
        Some(circle[start..start + len].to_string())
    };
    let model = format!("data-model=\"{model}\"");
    let mut points: Vec<(u32, f64)> = dom
        .split("<figure ")
        .skip(1)
        .filter(|figure| figure.contains(&model))
        .flat_map(|figure| figure.split("<circle ").skip(1))
        .filter(|circle| attr(circle, "data-series").as_deref() == Some(series))
        .map(|circle| {
            let epoch = attr(circle, "data-epoch").unwrap().parse().unwrap();
            (epoch, attr(circle, "data-value").unwrap().parse().unwrap())
        })
        .collect();
    points.sort_by_key(|p| p.0);
    points
}

/// The epochs the master holds for `model` (from the page's own JSON).
async fn reported_epochs(url: &str, model: &str) -> usize {
    let body = reqwest::get(format!("{url}api/status"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let status: Value = serde_json::from_str(&body).unwrap();
    status["epochs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["model"] == model)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_plots_the_finished_epochs_of_a_running_job_in_a_real_browser() {
    let Some(browser) = browser() else {
        let _ = writeln!(
            std::io::stderr(),
            "\n*** SKIPPED the status page test: no browser ({}) on the PATH; \
             `.ci/run` installs Debian's chromium ***\n",
            BROWSERS.join(", ")
        );
        return;
    };
    let service = spawn(&[
        "standalone",
        "--bind",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
    ]);
    let url = service
        .next_word(Duration::from_secs(10))
        .expect("standalone prints its HTTP URL");
    let job_file = repo("examples/a9a/job.sql");
    let data = format!("data={}", repo("examples/data/a9a").display());
    let master = service.addr.as_str();
    let mut job = start_job(
        &[
            job_file.to_str().unwrap(),
            "--master",
            master,
            "--namespace",
            "page",
            "--var",
            &data,
        ],
        &[],
    );

    // During the job: once the master holds an epoch, the page plots at least that one.
    let deadline = Instant::now() + Duration::from_secs(300);
    while reported_epochs(&url, "page/a9a").await == 0 {
        assert!(Instant::now() < deadline, "no epoch reported within 300 s");
        if !job.running() {
            panic!(
                "the job ended before reporting an epoch:\n{}",
                finished(job)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let dom = rendered(&browser, &url);
    let early = plotted(&dom, "page/a9a", "train_loss");
    assert!(!early.is_empty(), "no epoch plotted during the job:\n{dom}");

    let stdout = finished(job);
    let printed: Vec<Value> = json_lines(&stdout)
        .into_iter()
        .filter(|l| l["kind"] == "epoch")
        .collect();
    assert_eq!(printed.len(), 10, "the a9a job trains 10 epochs");
    assert!(early.len() <= printed.len());

    // After it: every epoch, at the values the job printed.
    let dom = rendered(&browser, &url);
    for series in ["train_loss", "holdout_loss", "holdout_auc"] {
        let points = plotted(&dom, "page/a9a", series);
        let expected: Vec<(u32, f64)> = printed
            .iter()
            .map(|e| {
                (
                    e["epoch"].as_u64().unwrap() as u32,
                    e[series].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(points.len(), expected.len(), "{series} points:\n{dom}");
        for ((epoch, value), (want_epoch, want)) in points.iter().zip(&expected) {
            assert_eq!(epoch, want_epoch, "{series}");
            assert!(
                (value - want).abs() <= 1e-12 * want.abs().max(1.0),
                "{series} of epoch {epoch}: plotted {value}, the job printed {want}"
            );
        }
    }
    assert!(
        dom.contains("data-epochs=\"10\""),
        "the model's epoch count"
    );
}
