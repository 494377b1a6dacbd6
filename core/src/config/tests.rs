use super::*;

fn cfg(preset: Option<Preset>, text: &str, cli: &CliOverrides) -> Result<NodeConfig, String> {
    let file = parse_layers(preset, text)?;
    resolve(file, preset, cli).map_err(|e| e.to_string())
}

#[test]
fn defaults_are_the_development_node() {
    let c = cfg(Some(Preset::Default), "", &CliOverrides::default()).expect("valid");
    assert_eq!(c.listen.to_string(), DEFAULT_LISTEN);
    assert_eq!(c.json_reads, JsonReads::Ndjson);
    assert_eq!(c.engine, EngineConfig::Memory);
    assert_eq!(c.cluster_id, None);
}

#[test]
fn cli_wins_over_file() {
    let text = "[server]\nlisten = \"127.0.0.1:9000\"\n[protocol]\njson_reads = \"array\"\n[raft]\nnode_id = 4\n";
    let cli = CliOverrides { listen: Some("127.0.0.1:0".into()), node_id: Some(7), ..Default::default() };
    let c = cfg(None, text, &cli).expect("valid");
    assert_eq!(c.listen.port(), 0);
    assert_eq!(c.json_reads, JsonReads::Array);
    let EngineConfig::Raft(raft) = c.engine else { panic!("a config file without a preset runs Raft") };
    assert_eq!(raft.node_id, 7);
}

#[test]
fn file_wins_over_preset_and_preset_over_defaults() {
    let c = cfg(Some(Preset::Small), "", &CliOverrides::default()).expect("valid");
    assert_eq!(c.group_count, 128);
    let c = cfg(Some(Preset::Large), "[raft]\ngroup_count = 12\n", &CliOverrides::default()).expect("valid");
    assert_eq!(c.group_count, 12);
    let c = cfg(None, "[runtime]\ncore_count = 3\n", &CliOverrides::default()).expect("valid");
    assert_eq!(c.group_count, 48, "core_count x 16");
    assert_eq!(c.http_workers, 3, "a core_count set is the connection threads too");
    assert_eq!(c.cpu_affinity, None, "automatic unless set");
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let unset = cfg(None, "", &CliOverrides::default()).expect("valid");
    assert_eq!((unset.core_count, unset.http_workers), (cpus, super::connection_workers(cpus)));
    for (text, set) in [("true", Some(true)), ("false", Some(false))] {
        let c = cfg(None, &format!("[runtime]\ncpu_affinity = {text}\n"), &CliOverrides::default()).expect("valid");
        assert_eq!(c.cpu_affinity, set);
    }
    for (preset, groups) in [(Preset::Tiny, 64), (Preset::Standard, 256)] {
        assert_eq!(cfg(Some(preset), "", &CliOverrides::default()).expect("valid").group_count, groups);
    }
}

/// spec/07's preset table, row by row: groups, cold cache, cold flushes,
/// cold writes, hot and admission caps, HTTP in-flight body budget.
#[test]
fn each_sized_preset_sets_the_documented_defaults() {
    const MIB: u64 = ByteSize::MIB;
    let rows = [
        (Preset::Tiny, 64, 64 * MIB, 4 * MIB, 2, 8 * MIB, 64 * MIB),
        (Preset::Small, 128, 64 * MIB, 4 * MIB, 2, 16 * MIB, 64 * MIB),
        (Preset::Standard, 256, 256 * MIB, 8 * MIB, 4, 64 * MIB, 256 * MIB),
        (Preset::Large, 512, 512 * MIB, 16 * MIB, 8, 128 * MIB, 512 * MIB),
    ];
    let cold = "[storage.cold]\nbackend = \"memory\"\n";
    for (preset, groups, cache, flush, writes, caps, bodies) in rows {
        let c = cfg(Some(preset), cold, &CliOverrides::default()).expect("valid");
        let k = c.cold.as_ref().expect("a cold backend");
        let got = (c.group_count, k.cache_size, k.flush_size, k.flush_max_concurrency, k.max_hot_size_per_group);
        assert_eq!(got, (groups, cache, flush, writes, caps), "{preset:?}");
        assert_eq!(c.admission.uncommitted_bytes_per_group, caps, "{preset:?}");
        assert_eq!(c.admission.inflight_body_bytes, bodies, "{preset:?}");
    }
    // The file still wins, and without a cold backend the cold keys rest.
    let c = cfg(
        Some(Preset::Tiny),
        "[storage.cold]\nbackend = \"memory\"\nflush_size = \"1MiB\"\n",
        &CliOverrides::default(),
    )
    .expect("valid");
    assert_eq!(c.cold.expect("cold").flush_size, MIB);
    assert!(cfg(Some(Preset::Large), "", &CliOverrides::default()).expect("valid").cold.is_none());
}

#[test]
fn engine_choice_follows_the_spec() {
    let none = CliOverrides::default();
    assert_eq!(cfg(Some(Preset::Dev), "", &none).expect("valid").engine, EngineConfig::Memory);
    assert!(matches!(cfg(Some(Preset::Tiny), "", &none).expect("valid").engine, EngineConfig::Raft(_)));
    let with_path = "[raft.wal]\npath = \"/tmp/x\"\n";
    let EngineConfig::Raft(raft) = cfg(Some(Preset::Default), with_path, &none).expect("valid").engine else {
        panic!("raft.wal.path runs Raft")
    };
    assert_eq!(raft.wal.path, Some(PathBuf::from("/tmp/x")));
    assert_eq!(raft.wal.fsync, FsyncSetting::Never);
    assert_eq!(raft.wal.segment_size, 64 << 20);
    assert_eq!(raft.wal.cache_size, 256 << 20);
    assert_eq!(raft.wal.min_available_size, 512 << 20);
    assert_eq!(raft.wal.resume_available_size, 1 << 30);
    assert_eq!(raft.snapshot_log_budget, 1 << 30);
    assert_eq!(raft.snapshot_backstop_logs, 100_000);
}

#[test]
fn unknown_keys_and_bad_values_are_refused_by_name() {
    let none = CliOverrides::default();
    let cases = [
        ("[server]\nlisten_addr = \"x\"\n", "listen_addr"),
        ("[raft.wal]\npaht = \"/x\"\n", "paht"),
        ("[raft.wal]\nfsync = \"sometimes\"\n", "raft.wal.fsync"),
        ("[raft.wal]\nsegment_size = \"1KiB\"\n", "raft.wal.segment_size"),
        ("[raft.wal]\nsegment_size = \"lots\"\n", "raft.wal.segment_size"),
        ("[raft.wal]\nmin_available_size = \"2GiB\"\n", "raft.wal.resume_available_size"),
        ("[raft]\ngroup_count = 0\n", "raft.group_count"),
        ("[raft]\ngroup_count = -3\n", "raft.group_count"),
        ("[protocol]\njson_reads = \"xml\"\n", "protocol.json_reads"),
        ("[server]\ncluster_id = \"has space\"\n", "server.cluster_id"),
        ("[runtime]\ncore_count = 0\n", "runtime.core_count"),
        ("[runtime]\ncpu_affinity = \"auto\"\n", "runtime.cpu_affinity"),
        ("[server\nlisten = 1", "line 1"),
    ];
    for (text, named) in cases {
        let err = cfg(None, text, &none).expect_err(text);
        assert!(err.contains(named), "{text:?}: {err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
}

#[test]
fn peers_bring_the_cluster_refusals() {
    let none = CliOverrides::default();
    let peers = "[[raft.peers]]\nnode_id = 1\nurl = \"http://10.0.0.1:4439\"\nclient_url = \"http://10.0.0.1:4437\"\n\
                 [[raft.peers]]\nnode_id = 2\nurl = \"http://10.0.0.2:4439\"\nclient_url = \"http://10.0.0.2:4437\"\n";
    let full = format!(
        "[server]\ncluster_id = \"prod\"\ncluster_listen = \"0.0.0.0:4439\"\n[raft]\nnode_id = 1\n[raft.wal]\npath = \"/x\"\n{peers}"
    );
    let c = cfg(None, &full, &none).expect("valid");
    let EngineConfig::Raft(raft) = c.engine else { panic!("peers run Raft") };
    assert_eq!(raft.peers.len(), 2);
    assert_eq!(raft.cluster_listen.map(|a| a.port()), Some(4439));
    let cases = [
        // spec/38's "Startup errors" headings, word for word.
        (full.replace("cluster_id = \"prod\"\n", ""), "server.cluster_id is required when raft.peers is set"),
        (full.replace("[raft.wal]\npath = \"/x\"\n", ""), "raft.wal.path is required when raft.peers is set"),
        (full.replace("node_id = 1\n[raft.wal]", "node_id = 3\n[raft.wal]"), "raft.peers must include this node id"),
        (full.replace("node_id = 1\n[raft.wal]", "node_id = 0\n[raft.wal]"), "raft.node_id must be non-zero"),
        (full.replace("client_url = \"http://10.0.0.2:4437\"\n", ""), "client_url"),
        (full.replace("client_url = \"http://10.0.0.2:4437\"", "client_url = \"http://10.0.0.2:4439\""), "differ"),
        (full.replace("node_id = 2\n", "node_id = 1\n"), "same node_id"),
    ];
    for (text, named) in cases {
        let err = cfg(None, &text, &none).expect_err(named);
        assert!(err.contains(named), "{named}: {err}");
    }
    let zero = CliOverrides { node_id: Some(0), ..CliOverrides::default() };
    assert_eq!(cfg(None, &full, &zero).expect_err("--node-id 0"), "raft.node_id must be non-zero");
    let single = "[raft]\nnode_id = 0\n[raft.wal]\npath = \"/x\"\n";
    assert_eq!(cfg(None, single, &none).expect_err("a single node too"), "raft.node_id must be non-zero");
    let bucketless = "[storage.cold]\nbackend = \"s3\"\n";
    assert_eq!(
        cfg(None, bucketless, &none).expect_err("no bucket"),
        "storage.cold.s3.bucket is required when cold backend is 's3'"
    );
}

#[test]
fn without_a_cluster_listener_the_planes_share_server_listen() {
    let text = "[server]\ncluster_id = \"prod\"\n[raft]\nnode_id = 1\n[raft.wal]\npath = \"/x\"\n\
                [[raft.peers]]\nnode_id = 1\nurl = \"http://10.0.0.1:4437\"\n\
                [[raft.peers]]\nnode_id = 2\nurl = \"http://10.0.0.2:4437\"\n";
    let c = cfg(None, text, &CliOverrides::default()).expect("valid");
    let EngineConfig::Raft(raft) = c.engine else { panic!("peers run Raft") };
    assert_eq!(raft.cluster_listen, None);
    let client_urls: Vec<&str> = raft.peers.iter().map(|p| p.client_url.as_str()).collect();
    assert_eq!(client_urls, ["http://10.0.0.1:4437", "http://10.0.0.2:4437"], "client_url defaults to url");
}

#[test]
fn snapshot_backend_auto_follows_the_cold_backend_on_a_cluster_only() {
    let none = CliOverrides::default();
    let cluster = "[server]\ncluster_id = \"prod\"\n[raft]\nnode_id = 1\n[raft.wal]\npath = \"/x\"\n\
                   [[raft.peers]]\nnode_id = 1\nurl = \"http://10.0.0.1:4437\"\n\
                   [[raft.peers]]\nnode_id = 2\nurl = \"http://10.0.0.2:4437\"\n";
    let s3 = "[storage.cold]\nbackend = \"s3\"\nroot = \"prod\"\n[storage.cold.s3]\nbucket = \"b\"\n";
    let store = |text: &str| match cfg(None, text, &none).expect("valid").engine {
        EngineConfig::Raft(raft) => raft.snapshot_store,
        EngineConfig::Memory => panic!("runs Raft"),
    };
    let on_s3 = store(&format!("{cluster}{s3}")).expect("auto is S3 with an S3 cold tier");
    let drive = |text: &str| match cfg(None, text, &none).expect("valid").engine {
        EngineConfig::Raft(raft) => raft.snapshot_drive_interval.as_secs(),
        EngineConfig::Memory => panic!("runs Raft"),
    };
    assert_eq!((drive(&format!("{cluster}{s3}")), drive(cluster)), (5, 1), "the drive interval's defaults");
    assert_eq!(on_s3.prefix, "prod/snapshots");
    assert_eq!((on_s3.s3.timeout, on_s3.s3.max_retries), (std::time::Duration::from_secs(10), 1));
    assert_eq!(store(&format!("{cluster}{s3}[storage.snapshot]\nbackend = \"inline\"\n")), None);
    assert_eq!(store(&format!("[raft.wal]\npath = \"/x\"\n{s3}")), None, "a single node stays inline");
    assert_eq!(store(cluster), None, "no cold tier: inline");
    let cases = [
        (format!("{cluster}[storage.snapshot]\nbackend = \"s3\"\n"), "needs storage.cold.backend"),
        (format!("{cluster}{s3}[storage.snapshot]\nbackend = \"disk\"\n"), "storage.snapshot.backend"),
        (format!("{cluster}{s3}[storage.snapshot]\ns3_prefix = \"a//b\"\n"), "storage.snapshot.s3_prefix"),
        ("[storage.snapshot]\ns3_prefix = \"a b\"\n".to_string(), "storage.snapshot.s3_prefix"),
        (format!("{cluster}[storage.snapshot]\ndrive_interval = \"0s\"\n"), "storage.snapshot.drive_interval"),
        (
            format!(
                "{}{s3}",
                cluster
                    .replace("node_id = 1\n[raft.wal]", "node_id = 1\ninstall_snapshot_timeout = \"60s\"\n[raft.wal]")
            ),
            "SnapshotCopyOutlastsInstall",
        ),
    ];
    for (text, named) in cases {
        let err = cfg(None, &text, &none).expect_err(named);
        assert!(err.contains(named), "{named}: {err}");
    }
}

#[test]
fn connection_timeouts_have_defaults_take_durations_and_refuse_zero() {
    let c = cfg(Some(Preset::Default), "", &CliOverrides::default()).expect("valid");
    assert_eq!(c.connections.header_read_timeout, Duration::from_secs(10));
    assert_eq!(c.connections.idle_timeout, Duration::from_secs(60));
    assert_eq!(c.body_pace, BodyPace { stall_timeout: Duration::from_secs(30), min_bytes_per_sec: 1024 });
    let text = "[server]\nheader_read_timeout = \"500ms\"\nidle_timeout = \"2m\"\nbody_min_bytes_per_sec = 10\n";
    let c = cfg(Some(Preset::Dev), text, &CliOverrides::default()).expect("valid");
    assert_eq!(c.connections.header_read_timeout, Duration::from_millis(500));
    assert_eq!(c.connections.idle_timeout, Duration::from_secs(120));
    assert_eq!(c.body_pace.min_bytes_per_sec, 10);
    let zero = cfg(Some(Preset::Dev), "[server]\nidle_timeout = \"0s\"\n", &CliOverrides::default());
    assert!(zero.is_err_and(|e| e.contains("server.idle_timeout")), "zero is refused, naming the key");
    let bad = cfg(Some(Preset::Dev), "[server]\nbody_stall_timeout = \"soon\"\n", &CliOverrides::default());
    assert!(bad.is_err_and(|e| e.contains("server.body_stall_timeout")));
}

#[test]
fn admission_limits_have_the_spec_defaults_and_the_presets_budget() {
    let none = CliOverrides::default();
    let c = cfg(Some(Preset::Standard), "[runtime]\ncore_count = 3\n", &none).expect("valid");
    assert_eq!(c.admission.inflight_body_bytes, 256 << 20);
    assert_eq!(c.admission.uncommitted_bytes_per_group, 64 << 20);
    assert_eq!(c.admission.live_read_waiters, Some(3 * 65_536), "per core");
    for preset in [Preset::Tiny, Preset::Small] {
        assert_eq!(cfg(Some(preset), "", &none).expect("valid").admission.inflight_body_bytes, 64 << 20);
    }
    let text = "[server]\nhttp_inflight_body_size = \"8MiB\"\n[runtime]\nlive_read_max_waiters_per_core = 0\n\
                [raft]\nmax_uncommitted_size_per_group = \"2MiB\"\n";
    let c = cfg(Some(Preset::Dev), text, &none).expect("valid");
    assert_eq!(c.admission.inflight_body_bytes, 8 << 20);
    assert_eq!(c.admission.uncommitted_bytes_per_group, 2 << 20);
    assert_eq!(c.admission.live_read_waiters, None, "0 lifts the cap");
    let zero = cfg(Some(Preset::Dev), "[raft]\nmax_uncommitted_size_per_group = \"0B\"\n", &none);
    assert!(zero.expect_err("refused").contains("raft.max_uncommitted_size_per_group"));
}

#[test]
fn a_cold_node_needs_64_mib_of_inflight_body_budget() {
    let cold = "[storage.cold]\nbackend = \"s3\"\nroot = \"prod\"\n[storage.cold.s3]\nbucket = \"b\"\n";
    let small = format!("[server]\nhttp_inflight_body_size = \"32MiB\"\n{cold}");
    let refused = cfg(Some(Preset::Dev), &small, &CliOverrides::default()).expect_err("refused");
    assert!(refused.contains("InflightBodyBudgetTooSmall"), "{refused}");
    let enough = format!("[server]\nhttp_inflight_body_size = \"64MiB\"\n{cold}");
    assert!(cfg(Some(Preset::Dev), &enough, &CliOverrides::default()).is_ok());
}

#[test]
fn the_s3_health_gate_has_the_spec_defaults_and_refuses_zero() {
    let none = CliOverrides::default();
    let s3 = "[storage.cold]\nbackend = \"s3\"\nroot = \"prod\"\n[storage.cold.s3]\nbucket = \"b\"\n";
    let c = cfg(Some(Preset::Dev), s3, &none).expect("valid");
    let Some(crate::cold::ColdBackend::S3(settings)) = c.cold.map(|c| c.backend) else { panic!("an S3 tier") };
    assert_eq!(settings.health.probe_timeout, Duration::from_secs(5));
    assert_eq!((settings.health.unhealthy_ticks, settings.health.heal_ticks), (3, 2));
    assert_eq!(settings.write_window(Duration::from_secs(1)), Duration::from_secs(40 + 6 + 1), "4 attempts of 10 s");
    for key in ["probe_timeout = \"0s\"", "unhealthy_ticks = 0", "heal_ticks = 0"] {
        let refused = cfg(Some(Preset::Dev), &format!("{s3}{key}\n"), &none).expect_err("zero is refused");
        assert!(refused.contains(key.split(' ').next().unwrap_or_default()), "{refused}");
    }
}

#[test]
fn connections_are_served_on_one_thread_fewer_than_the_cpus_at_least_one() {
    for (cpus, threads) in [(1, 1), (2, 1), (3, 2), (16, 15)] {
        assert_eq!(super::connection_workers(cpus), threads, "{cpus} CPUs");
    }
}

/// Keys spec/07 writes in ways the parser once refused: a bare `0` that
/// disables the age flush, hours, and the Tokio console switch.
#[test]
fn documented_spellings_load() {
    let none = CliOverrides::default();
    let cold = "[storage.cold]\nbackend = \"memory\"\n";
    let c = cfg(None, &format!("{cold}flush_max_hot_age = 0\n"), &none).expect("bare 0");
    assert_eq!(c.cold.expect("cold").flush_max_hot_age, Duration::ZERO);
    let c = cfg(None, &format!("{cold}flush_max_hot_age = \"1h\"\n"), &none).expect("hours");
    assert_eq!(c.cold.expect("cold").flush_max_hot_age, Duration::from_secs(3600));
    let err = cfg(None, &format!("{cold}flush_max_hot_age = 5\n"), &none).expect_err("a bare 5");
    assert!(err.contains("storage.cold.flush_max_hot_age") && err.contains("needs a unit"), "{err}");
    assert!(!cfg(None, "", &none).expect("valid").tokio_console);
    assert!(cfg(None, "[observability]\ntokio_console = true\n", &none).expect("valid").tokio_console);
    // Cold compaction: on unless turned off (spec/07).
    let compaction = |text: &str| cfg(None, text, &none).expect("valid").cold.expect("a cold tier").compaction_enabled;
    assert!(compaction("[storage.cold]\nbackend = \"memory\"\n"));
    assert!(compaction("[storage.cold]\nbackend = \"memory\"\ncompaction_enabled = true\n"));
    assert!(!compaction("[storage.cold]\nbackend = \"memory\"\ncompaction_enabled = false\n"));
}

/// `raft.snapshot_build_max_concurrency` loads from 1 to 16 (default 2) and
/// refuses the rest with the text of the 0.7.5 release notes.
#[test]
fn snapshot_build_limits() {
    let none = CliOverrides::default();
    let raft = |text: &str| -> Result<(usize, usize), String> {
        let c = cfg(None, &format!("[raft]\n{text}[raft.wal]\npath = \"/x\"\n"), &none)?;
        let EngineConfig::Raft(r) = c.engine else { panic!("a WAL path runs Raft") };
        Ok((r.snapshot_build_max_concurrency, r.snapshot_pressure_max_groups_per_tick))
    };
    assert_eq!(raft(""), Ok((2, 16)));
    assert_eq!(raft("snapshot_build_max_concurrency = 16\nsnapshot_pressure_max_groups_per_tick = 3\n"), Ok((16, 3)));
    assert_eq!(
        raft("snapshot_build_max_concurrency = 17\n"),
        Err("raft.snapshot_build_max_concurrency (17) must be between 1 and 16".into())
    );
    assert_eq!(
        raft("snapshot_build_max_concurrency = 0\n"),
        Err("raft.snapshot_build_max_concurrency (0) must be between 1 and 16".into())
    );
    assert!(raft("snapshot_pressure_max_groups_per_tick = 0\n").expect_err("0").contains("at least 1"));
}

/// `raft.append_transport_budget_bytes` (spec/07): bytes, 128 MiB unless set, never 0.
#[test]
fn append_transport_budget() {
    let none = CliOverrides::default();
    let raft = |text: &str| -> Result<u64, String> {
        let c = cfg(None, &format!("[raft]\n{text}[raft.wal]\npath = \"/x\"\n"), &none)?;
        let EngineConfig::Raft(r) = c.engine else { panic!("a WAL path runs Raft") };
        Ok(r.append_transport_budget)
    };
    assert_eq!(raft(""), Ok(128 << 20));
    assert_eq!(raft("append_transport_budget_bytes = 134217728\n"), Ok(134_217_728));
    assert_eq!(raft("append_transport_budget_bytes = \"8MiB\"\n"), Ok(8 << 20));
    assert!(raft("append_transport_budget_bytes = 0\n").expect_err("0").contains("raft.append_transport_budget_bytes"));
}

/// spec/19, 35, 38 and 43 keys of `[runtime]` and `[raft]`.
#[test]
fn runtime_and_raft_keys_of_the_operations_pages() {
    let none = CliOverrides::default();
    let cold = "[storage.cold]\nbackend = \"memory\"\n";
    let c = cfg(None, cold, &none).expect("valid");
    assert_eq!(c.cold.expect("cold").external_payload_min_size, 1024 * 1024);
    let c = cfg(None, &format!("{cold}[runtime]\nexternal_payload_min_size = \"256KiB\"\n"), &none).expect("valid");
    assert_eq!(c.cold.expect("cold").external_payload_min_size, 256 * 1024);
    let err = cfg(None, "[runtime]\nexternal_payload_min_size = 0\n", &none).expect_err("0");
    assert!(err.contains("runtime.external_payload_min_size"), "{err}");
    assert_eq!(cfg(None, "", &none).expect("valid").memory_abort_cap, None);
    let c = cfg(None, "[runtime]\nnode_memory_abort_cap_size = \"6GiB\"\n", &none).expect("valid");
    assert_eq!(c.memory_abort_cap, Some(6 * ByteSize::GIB));
    let raft = |text: &str| {
        let c = cfg(None, &format!("[raft]\n{text}[raft.wal]\npath = \"/x\"\n"), &none).expect("valid");
        let EngineConfig::Raft(r) = c.engine else { panic!("a WAL path runs Raft") };
        (r.init_membership_per_group, r.max_in_snapshot_log_to_keep)
    };
    assert_eq!(raft(""), (false, 0));
    assert_eq!(raft("init_membership = true\nmax_in_snapshot_log_to_keep = 1000\n"), (true, 1000));
    assert_eq!(raft("init_membership_per_group = true\n"), (true, 0));
}

/// `raft.deleted_data_max_age`: an hour or eight install timeouts, and no
/// set value below eight install timeouts.
#[test]
fn deleted_data_max_age_has_its_floor() {
    let none = CliOverrides::default();
    let age = |text: &str| -> Result<Duration, String> {
        let c = cfg(None, &format!("[raft]\n{text}[raft.wal]\npath = \"/x\"\n"), &none)?;
        let EngineConfig::Raft(r) = c.engine else { panic!("a WAL path runs Raft") };
        Ok(r.deleted_data_max_age)
    };
    assert_eq!(age(""), Ok(Duration::from_secs(3600)));
    assert_eq!(age("install_snapshot_timeout = \"10m\"\n"), Ok(Duration::from_secs(4800)));
    assert_eq!(age("deleted_data_max_age = \"16m\"\n"), Ok(Duration::from_secs(960)));
    let err = age("deleted_data_max_age = \"15m\"\n").expect_err("below eight installs");
    assert!(err.contains("raft.deleted_data_max_age") && err.contains("eight times"), "{err}");
}

/// `--preset default` with a file still checks the snapshot keys the
/// in-memory engine does not use: a file that refuses under Raft refuses here.
#[test]
fn the_in_memory_engine_checks_the_drive_interval_too() {
    let err = cfg(Some(Preset::Default), "[storage.snapshot]\ndrive_interval = \"0s\"\n", &CliOverrides::default())
        .expect_err("0s");
    assert!(err.contains("storage.snapshot.drive_interval"), "{err}");
}

/// spec/07's advanced split of `storage.cold.flush_size`: the threshold and
/// the batch each default to it.
#[test]
fn the_flush_size_splits_into_threshold_and_batch() {
    let none = CliOverrides::default();
    let cold = |text: &str| cfg(None, &format!("[storage.cold]\nbackend = \"memory\"\n{text}"), &none);
    let c = cold("flush_size = \"2MiB\"\n").expect("valid").cold.expect("cold");
    assert_eq!((c.flush_min_hot_size, c.flush_max_size), (2 << 20, 2 << 20));
    let c = cold("flush_min_hot_size = \"1MiB\"\nflush_max_size = \"16MiB\"\n").expect("valid").cold.expect("cold");
    assert_eq!((c.flush_size, c.flush_min_hot_size, c.flush_max_size), (8 << 20, 1 << 20, 16 << 20));
    assert!(cold("flush_max_size = 0\n").expect_err("0").contains("storage.cold.flush_max_size"));
}
