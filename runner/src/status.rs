//! `angel-ps status`: servers, matrices, counters and pushes per client as tables, or with
//! `--output json` as JSON lines, one per table.

use std::collections::HashMap;

use angel_client::{PsClient, Result, worker_pid};
use angel_proto::namespace;
use angel_proto::pulls::lead;
use angel_proto::{StatusReply, StatusRequest};
use comfy_table::Table;
use serde_json::{Value, json};

use crate::client_access::ClientAccess;
use crate::output::{self, Output};

/// Flags of `angel-ps status`.
#[derive(Debug)]
#[cfg_attr(feature = "flags", derive(clap::Args))]
pub struct StatusOptions {
    /// Master address (host:port).
    #[cfg_attr(feature = "flags", arg(long, env = "ANGEL_MASTER"))]
    pub master: String,
    /// Also read the servers' records of training pulls and show, per model, how far ahead of
    /// the slowest worker still training any worker pulled.
    #[cfg_attr(feature = "flags", arg(long))]
    pub pulls: bool,
    /// Also show the leases of model rotation: which worker held which slice at each step of
    /// each round, and for how long.
    #[cfg_attr(feature = "flags", arg(long))]
    pub leases: bool,
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[cfg_attr(feature = "flags", arg(long, value_enum, default_value_t))]
    pub output: Output,
    /// The CA of the service's TLS.
    #[cfg_attr(feature = "flags", command(flatten))]
    pub access: ClientAccess,
}

/// One part of the status: a heading (may be empty) over a table (may be absent), under a
/// stable name (the table's name in JSON output).
struct Section {
    name: &'static str,
    heading: String,
    table: Option<Table>,
}

impl Section {
    fn new(name: &'static str, heading: impl Into<String>, table: Option<Table>) -> Self {
        Section {
            name,
            heading: heading.into(),
            table,
        }
    }

    /// The heading line, then the box-drawn table.
    fn text(&self) -> String {
        let lines = [
            Some(self.heading.clone()).filter(|h| !h.is_empty()),
            self.table.as_ref().map(Table::to_string),
        ];
        lines.into_iter().flatten().map(|l| l + "\n").collect()
    }

    /// A `table` line with the heading as `title`, or a `note` line when there is no table.
    fn json(&self) -> Value {
        let Some(table) = &self.table else {
            return json!({"kind": "note", "text": self.heading});
        };
        let cells = |row: &comfy_table::Row| row.cell_iter().map(|c| c.content()).collect();
        let header: Vec<String> = table.header().map(cells).unwrap_or_default();
        let rows: Vec<Vec<String>> = table.row_iter().map(cells).collect();
        let mut line = output::table_line(self.name, &header, &rows);
        if !self.heading.is_empty() {
            line["title"] = json!(self.heading);
        }
        line
    }
}

/// Prints the service's status.
pub async fn run(args: StatusOptions) -> Result<()> {
    let client = PsClient::connect_with(&args.master, args.access.config()?).await?;
    let request = StatusRequest {
        pulls: args.pulls,
        leases: args.leases,
        ..Default::default()
    };
    let status = client.status_with(request).await?;
    let mut parts = sections(&status);
    if args.pulls {
        parts.push(leads_table(&status));
    }
    if args.leases {
        parts.push(leases_table(&status));
    }
    for part in &parts {
        match args.output {
            Output::Text => print!("{}", part.text()),
            Output::Json => output::print(&part.json()),
        }
    }
    Ok(())
}

/// The status as text: servers, matrices, counters, pushes per client, snapshots,
/// recoveries and training workers.
pub fn render(status: &StatusReply) -> String {
    sections(status).iter().map(Section::text).collect()
}

/// The parts of the status, in the order printed.
fn sections(status: &StatusReply) -> Vec<Section> {
    let map = status.map.clone().unwrap_or_default();
    let mut per_matrix: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut servers = Table::new();
    servers.set_header([
        "server",
        "address",
        "state",
        "heartbeat",
        "partitions",
        "elements",
        "bytes",
    ]);
    for s in &status.servers {
        let (elements, bytes) = s.partitions.iter().fold((0, 0), |(e, b), p| {
            let m = per_matrix.entry(p.matrix_id).or_default();
            (m.0, m.1) = (m.0 + p.elements, m.1 + p.bytes);
            (e + p.elements, b + p.bytes)
        });
        let mut state = if s.reachable && s.standby {
            "standby".to_string()
        } else if s.reachable {
            "up".to_string()
        } else {
            format!("unreachable: {}", s.error)
        };
        if !s.snapshot_error.is_empty() {
            state += &format!("; SNAPSHOTS FAIL: {}", s.snapshot_error);
        }
        servers.add_row([
            s.server_id.to_string(),
            s.addr.clone(),
            state,
            format!("{} ms ago", s.last_heartbeat_ms),
            s.partitions.len().to_string(),
            elements.to_string(),
            bytes.to_string(),
        ]);
    }
    let mut matrices = Table::new();
    matrices.set_header([
        "namespace",
        "matrix",
        "id",
        "shape",
        "type",
        "storage",
        "partitions",
        "elements",
        "bytes",
    ]);
    for m in &map.matrices {
        let (elements, bytes) = per_matrix.get(&m.id).copied().unwrap_or_default();
        let (namespace, name) = split_namespace(&m.name);
        matrices.add_row([
            namespace.to_string(),
            name.to_string(),
            m.id.to_string(),
            format!("{} x {}", m.rows, m.cols),
            format!("{:?}", m.value_type()),
            format!("{:?}", m.storage()),
            m.partitions.len().to_string(),
            elements.to_string(),
            bytes.to_string(),
        ]);
    }
    let mut counters = Table::new();
    counters.set_header([
        "namespace",
        "counter",
        "id",
        "state",
        "min count",
        "indexed keys",
        "keys",
        "bytes",
    ]);
    for c in &map.counters {
        let (keys, bytes) = per_matrix.get(&c.id).copied().unwrap_or_default();
        let (namespace, name) = split_namespace(&c.name);
        counters.add_row([
            namespace.to_string(),
            name.to_string(),
            c.id.to_string(),
            format!("{:?}", c.state()),
            c.min_count.to_string(),
            c.size.to_string(),
            keys.to_string(),
            bytes.to_string(),
        ]);
    }
    let names: HashMap<u32, &str> = map
        .matrices
        .iter()
        .map(|m| (m.id, m.name.as_str()))
        .collect();
    let mut names = names;
    names.extend(map.counters.iter().map(|c| (c.id, c.name.as_str())));
    let mut parts = Vec::new();
    if !status.doubt.is_empty() {
        let note = format!(
            "THE MASTER REFUSES CHANGES: {} (restart it with the --snapshot-dir that holds its \
             state, or with --start-empty to have the servers drop what they hold)",
            status.doubt
        );
        parts.push(Section::new("doubt", note, None));
    }
    if !status.state_error.is_empty() {
        let note = format!("THE MASTER CANNOT SAVE ITS STATE: {}", status.state_error);
        parts.push(Section::new("state", note, None));
    }
    parts.extend([
        Section::new("map", format!("partition map epoch {}", map.epoch), None),
        Section::new("servers", "", Some(servers)),
        Section::new("matrices", "", Some(matrices)),
        Section::new("counters", "", Some(counters)),
        Section::new("pushes", "", Some(pushes_table(status, &names))),
        snapshots_table(status, &names),
    ]);
    parts.extend(recoveries_table(status));
    parts.extend(workers_table(status));
    parts
}

/// A service-wide name as (namespace, name); the namespace is empty for a name in none.
fn split_namespace(full: &str) -> (&str, &str) {
    let (namespace, name) = namespace::split(full);
    (namespace.unwrap_or_default(), name)
}

/// Training workers of each model's current or last round: clock, rate, waits, slow flag;
/// nothing when no model trained.
fn workers_table(status: &StatusReply) -> Option<Section> {
    if status.workers.is_empty() {
        return None;
    }
    let mut table = Table::new();
    table.set_header([
        "model",
        "rank",
        "clock",
        "steps/s",
        "waited",
        "others waited for it",
        "state",
    ]);
    for w in &status.workers {
        let state = match (w.slow, w.left, w.evicted) {
            (_, _, true) => "dropped (silent)",
            (true, true, _) => "SLOW, finished",
            (true, false, _) => "SLOW",
            (false, true, _) => "finished",
            (false, false, _) => "training",
        };
        table.add_row([
            w.model.clone(),
            w.rank.to_string(),
            w.clock.to_string(),
            format!("{:.1}", w.steps_per_sec),
            format!("{:.1} s", w.waited_ms as f64 / 1e3),
            format!("{:.1} s", w.caused_wait_ms as f64 / 1e3),
            state.to_string(),
        ]);
    }
    Some(Section::new("workers", "training workers", Some(table)))
}

/// The leases of model rotation: model, round, step, group and rank in it, slice, how long
/// it was held, and the rows trained on it and for how long.
fn leases_table(status: &StatusReply) -> Section {
    let mut table = Table::new();
    let header = [
        "model", "round", "step", "rank", "slice", "held", "rows", "training",
    ];
    table.set_header(header);
    for l in &status.leases {
        let held = match l.end_us {
            0 => "held now".to_string(),
            end => format!("{:.1} ms", end.saturating_sub(l.start_us) as f64 / 1e3),
        };
        table.add_row([
            l.model.clone(),
            l.round.to_string(),
            l.step.to_string(),
            l.group.to_string(),
            l.rank.to_string(),
            l.slice.to_string(),
            held,
            l.rows.to_string(),
            format!("{:.1} ms", l.busy_us as f64 / 1e3),
        ]);
    }
    Section::new("leases", "leases of model rotation", Some(table))
}

/// Per model and server: training pulls recorded and the largest lead of a pull over a
/// worker still training (what SSP's staleness bounds).
fn leads_table(status: &StatusReply) -> Section {
    let map = status.map.clone().unwrap_or_default();
    let mut table = Table::new();
    table.set_header(["model", "server", "pulls recorded", "largest lead (clocks)"]);
    for m in &map.matrices {
        for s in &status.servers {
            let pulls: Vec<_> = s.pulls.iter().filter(|p| p.matrix_id == m.id).collect();
            if pulls.is_empty() {
                continue;
            }
            let count = pulls.len();
            table.add_row([
                m.name.clone(),
                s.server_id.to_string(),
                count.to_string(),
                lead(pulls).max.to_string(),
            ]);
        }
    }
    Section::new("pulls", "training pulls", Some(table))
}

/// Servers declared dead and what became of their partitions and of the changes clients had
/// made since their snapshots (as the clients reported); nothing when none died.
fn recoveries_table(status: &StatusReply) -> Option<Section> {
    if status.recoveries.is_empty() {
        return None;
    }
    let mut table = Table::new();
    table.set_header([
        "dead server",
        "address",
        "cause",
        "restored",
        "took",
        "partitions lost",
        "changes replayed",
        "changes lost",
    ]);
    for r in &status.recoveries {
        table.add_row([
            r.server_id.to_string(),
            r.addr.clone(),
            r.cause.clone(),
            format!("{} partitions", r.restored),
            format!("{} ms", r.millis),
            match r.error.is_empty() {
                true => "nothing".to_string(),
                false => r.error.clone(),
            },
            r.changes_replayed.to_string(),
            r.changes_lost.to_string(),
        ]);
    }
    Some(Section::new("recoveries", "recoveries", Some(table)))
}

/// Each partition's changes and newest snapshot (age, bytes, the pause it cost pushes), or
/// the line saying snapshots are off.
fn snapshots_table(status: &StatusReply, names: &HashMap<u32, &str>) -> Section {
    if status.snapshot_dir.is_empty() {
        let off = "snapshots: off (start the master with --snapshot-dir URL)";
        return Section::new("snapshots", off, None);
    }
    let mut table = Table::new();
    table.set_header([
        "matrix",
        "partition",
        "server",
        "changes",
        "in snapshot",
        "duplicates",
        "too old",
        "replayed",
        "snapshot age",
        "snapshot bytes",
        "pause",
    ]);
    let mut rows: Vec<(u32, &angel_proto::PartitionStats)> = status
        .servers
        .iter()
        .flat_map(|s| s.partitions.iter().map(move |p| (s.server_id, p)))
        .collect();
    rows.sort_by_key(|(_, p)| (p.matrix_id, p.partition_id));
    for (server, p) in rows {
        table.add_row([
            names
                .get(&p.matrix_id)
                .map_or_else(|| p.matrix_id.to_string(), |n| n.to_string()),
            p.partition_id.to_string(),
            server.to_string(),
            p.version.to_string(),
            p.durable.to_string(),
            p.duplicates.to_string(),
            p.below_window.to_string(),
            p.replayed.to_string(),
            format!("{:.1} s", p.snapshot_age_ms as f64 / 1e3),
            p.snapshot_bytes.to_string(),
            format!("{:.2} ms", p.snapshot_pause_us as f64 / 1e3),
        ]);
    }
    let heading = format!(
        "snapshots to {} every {:.1} s",
        status.snapshot_dir,
        status.snapshot_interval_ms as f64 / 1e3
    );
    Section::new("snapshots", heading, Some(table))
}

/// Pushes per (client, matrix), summed over servers, with bytes sent beside what raw keys and
/// values would have cost. A client is named by its worker id and the process id inside it.
fn pushes_table(status: &StatusReply, names: &HashMap<u32, &str>) -> Table {
    let mut table = Table::new();
    table.set_header([
        "client",
        "pid",
        "matrix",
        "pushes",
        "elements",
        "bytes sent",
        "raw bytes",
        "ratio",
        "compressed slices",
    ]);
    for p in angel_proto::pushes::totals(status) {
        table.add_row([
            format!("{:#x}", p.worker_id),
            worker_pid(p.worker_id).to_string(),
            names
                .get(&p.matrix_id)
                .map_or_else(|| p.matrix_id.to_string(), |n| n.to_string()),
            p.pushes.to_string(),
            p.elements.to_string(),
            p.bytes.to_string(),
            p.raw_bytes.to_string(),
            format!("{:.2}", p.raw_bytes as f64 / p.bytes.max(1) as f64),
            format!("{} of {}", p.compressed_slices, p.slices),
        ]);
    }
    table
}
