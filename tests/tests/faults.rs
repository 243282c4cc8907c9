//! Fault injection on real processes with exact-value checks: every scenario of `angel-ps
//! bench chaos` once (the bench runs each three times). A scenario fails on an expectation it
//! did not meet (a refusal, a recovery, a status line); here, besides, nothing may be lost or
//! applied twice.

use angel_bench::chaos::Scenario;
use angel_tests::{binary, survives};

#[tokio::test(flavor = "multi_thread")]
async fn a_master_restarted_without_its_state_refuses_changes_and_no_server_drops_data() {
    survives(Scenario::MasterWithoutState).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_master_resumed_from_an_older_state_refuses_changes_and_restores_nothing() {
    survives(Scenario::MasterOlderState).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_snapshot_store_that_fails_is_shown_and_a_restart_from_its_stale_state_changes_nothing() {
    survives(Scenario::FailingStore).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_restarted_on_its_address_replaces_its_dead_predecessor_at_once() {
    survives(Scenario::ServerRestarted).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_servers_killed_at_once_lose_nothing_when_one_restore_target_is_dead_too() {
    survives(Scenario::TwoServersKilled).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn partitions_with_no_live_server_left_wait_for_one_and_lose_nothing() {
    survives(Scenario::EveryServerKilled).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_under_a_stream_of_changes_loses_none_and_applies_none_twice() {
    survives(Scenario::KilledMidStream).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_after_its_writer_left_keeps_the_writers_changes() {
    survives(Scenario::WriterLeft).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_replay_buffer_asks_for_snapshots_instead_of_dropping_changes() {
    survives(Scenario::FullReplayBuffer).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_server_woken_after_its_replacement_serves_and_writes_nothing_stale() {
    survives(Scenario::FrozenServer).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_master_frozen_past_the_server_timeout_declares_no_server_dead_when_it_wakes() {
    survives(Scenario::FrozenMaster).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_master_killed_mid_rotation_resumes_the_round_and_every_step_trains_once() {
    survives(Scenario::MasterKilledMidRotation).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_master_frozen_mid_rotation_wakes_and_every_step_trains_once() {
    survives(Scenario::MasterFrozenMidRotation).await;
}

/// The bench as a user runs it: one scenario, its row read back as JSON.
#[test]
fn bench_chaos_prints_one_row_per_scenario_with_runs_and_values_off() {
    let stdout = angel_tests::stdout_of(
        std::process::Command::new(binary())
            .args(["bench", "chaos", "--runs", "1", "--scenario", "writer-left"])
            .args(["--output", "json"]),
    );
    let table = angel_tests::json_lines(&stdout)
        .into_iter()
        .find(|l| l["table"] == "chaos")
        .unwrap_or_else(|| panic!("no chaos table in {stdout}"));
    let row = &table["rows"][0];
    assert_eq!(row["scenario"], "writer-left", "{table}");
    assert_eq!(row["runs"], 1, "{table}");
    assert_eq!(row["finished"], 1, "{table}");
    assert_eq!(row["lost"], 0, "{table}");
    assert_eq!(row["doubled"], 0, "{table}");
    assert!(row["recovery ms (max)"].as_f64().is_some(), "{table}");
}
