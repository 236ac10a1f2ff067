//! The settings' unit tests: defaults, flags over the file, limits refused by name.
use super::*;
use clap::Parser;
use std::path::Path;

#[test]
fn typo_names_the_option() {
    let err = FileConfig::parse("netwrok = \"regtest\"\n", Path::new("x.toml")).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("netwrok"), "{text}");
}

#[test]
fn flags_win_over_file() {
    let file =
        FileConfig::parse("network = \"signet\"\nlog = \"debug\"\n", Path::new("x")).unwrap();
    let over = FileConfig {
        network: Some("regtest".into()),
        ..Default::default()
    };
    let s = Settings::resolve(file, over).unwrap();
    assert_eq!(s.network, Network::Regtest);
    assert_eq!(s.log, "debug");
    assert_eq!(s.admin_addr.port(), Network::Regtest.default_admin_port());
}

#[test]
fn p2p_defaults_per_network() {
    let resolve = |file: &str, over: FileConfig| {
        Settings::resolve(FileConfig::parse(file, Path::new("x")).unwrap(), over).unwrap()
    };
    let default = resolve("", FileConfig::default());
    assert_eq!(
        default.network,
        Network::Mainnet,
        "mainnet unless told otherwise"
    );
    let regtest = resolve("network = \"regtest\"\n", FileConfig::default());
    assert_eq!(regtest.p2p.listen, Some("127.0.0.1:18444".parse().unwrap()));
    assert!(
        !regtest.p2p.listen_required,
        "the default listener may find its port taken"
    );
    assert!(regtest.p2p.enabled());
    let off = resolve(
        "network = \"regtest\"\np2p_listen = false\n",
        FileConfig::default(),
    );
    assert_eq!(off.p2p.listen, None);
    assert!(!off.p2p.enabled(), "regtest has no seeds: nothing to do");
    let asked = resolve(
        "network = \"regtest\"\n",
        FileConfig {
            p2p_addr: Some("127.0.0.1:1".parse().unwrap()),
            ..Default::default()
        },
    );
    assert!(asked.p2p.listen_required);
    let mainnet = resolve("network = \"mainnet\"\n", FileConfig::default());
    assert_eq!(mainnet.p2p.listen, None);
    assert_eq!(mainnet.p2p.max_outbound, 8);
    assert!(
        mainnet.p2p.enabled(),
        "mainnet looks for peers through its seeds"
    );
    let only = resolve(
        "network = \"mainnet\"\nconnect = [\"192.0.2.1:8333\"]\n",
        FileConfig::default(),
    );
    assert_eq!(only.p2p.connect.len(), 1);
}

#[test]
fn example_config_parses() {
    let text = include_str!("../../config/cairn.example.toml");
    FileConfig::parse(text, Path::new("cairn.example.toml")).unwrap();
}

#[test]
fn signetchallenge_needs_signet_and_gets_own_dir() {
    let over = FileConfig {
        network: Some("regtest".into()),
        signetchallenge: Some("51".into()),
        ..Default::default()
    };
    assert!(Settings::resolve(FileConfig::default(), over).is_err());
    let over = FileConfig {
        network: Some("signet".into()),
        signetchallenge: Some("51".into()),
        datadir: Some("/d".into()),
        ..Default::default()
    };
    let s = Settings::resolve(FileConfig::default(), over).unwrap();
    assert!(s.network_dir().to_string_lossy().starts_with("/d/signet-"));
    assert_ne!(s.magic(), Network::Signet.magic());
}

#[test]
fn host_limits_and_their_exemptions() {
    let s = Settings::resolve(FileConfig::default(), FileConfig::default()).unwrap();
    let local: Vec<String> = s
        .electrum
        .hosts
        .exempt
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(local, ["127.0.0.1/32", "::1/128"]);
    assert_eq!(
        (s.electrum.hosts.per_ip, s.electrum.hosts.per_subnet),
        (12, 48)
    );
    assert_eq!((s.http_hosts.per_ip, s.http_hosts.per_subnet), (32, 128));
    let flags = parse(&["--host-limit-exempt=10.0.0.0/8,2001:db8::1"]).unwrap();
    let s = Settings::resolve(FileConfig::default(), flags.options()).unwrap();
    let listed: Vec<String> = s.http_hosts.exempt.iter().map(|n| n.to_string()).collect();
    assert_eq!(listed, ["10.0.0.0/8", "2001:db8::1/128"]);
    assert_eq!(s.electrum.hosts.exempt, s.http_hosts.exempt);
    let none = parse(&["--host-limit-exempt="]).unwrap();
    let s = Settings::resolve(FileConfig::default(), none.options()).unwrap();
    assert!(
        s.electrum.hosts.exempt.is_empty(),
        "an empty list spares no host"
    );
    let bad = parse(&["--host-limit-exempt=10.0.0.0/33"]).unwrap();
    let err = Settings::resolve(FileConfig::default(), bad.options()).unwrap_err();
    assert!(err.to_string().contains("host_limit_exempt"), "{err}");
    let file = FileConfig::parse(
        "electrum_max_connections_per_ip = 20\nelectrum_max_connections_per_subnet = 10\n",
        Path::new("x"),
    )
    .unwrap();
    let err = Settings::resolve(file, FileConfig::default()).unwrap_err();
    assert!(
        err.to_string()
            .contains("electrum_max_connections_per_subnet"),
        "{err}"
    );
}

#[test]
fn zero_limits_are_refused_by_name_and_others_apply() {
    for option in [
        "electrum_max_line_bytes",
        "electrum_max_batch",
        "electrum_max_subscriptions",
        "electrum_max_connections",
        "electrum_max_history",
        "electrum_idle_timeout_secs",
        "index_cache_mb",
        "mempool_max_mb",
        "http_max_connections",
        "electrum_answer_budget_mb",
        "min_free_space_mb",
        "electrum_max_connections_per_ip",
        "electrum_max_connections_per_subnet",
        "electrum_write_timeout_secs",
        "electrum_max_subscriptions_per_ip",
        "electrum_max_subscriptions_total",
        "http_max_connections_per_ip",
        "http_max_connections_per_subnet",
        "http_work_queue",
        "query_threads",
    ] {
        let file = FileConfig::parse(&format!("{option} = 0\n"), Path::new("x")).unwrap();
        let err = Settings::resolve(file, FileConfig::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(option) && err.contains("at least 1"),
            "{option}: {err}"
        );
    }
    // A margin whose bytes overflow 64 bits is refused by name, not wrapped.
    let file = FileConfig::parse(
        &format!("min_free_space_mb = {}\n", u64::MAX / 1024),
        Path::new("x"),
    )
    .unwrap();
    let err = Settings::resolve(file, FileConfig::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("min_free_space_mb"), "{err}");
    let file = FileConfig::parse(
        "electrum_max_batch = 7\nelectrum_idle_timeout_secs = 9\nmempool_max_mb = 2\n",
        Path::new("x"),
    )
    .unwrap();
    let s = Settings::resolve(file, FileConfig::default()).unwrap();
    assert_eq!(s.electrum.max_batch, 7);
    assert_eq!(s.electrum.idle_timeout, std::time::Duration::from_secs(9));
    assert_eq!(s.mempool.max_bytes, 2_000_000);
    assert_eq!(
        s.electrum.max_history,
        ElectrumConfig::defaults(Network::Regtest).max_history
    );
}

/// The settings a config file's text resolves to, with no flags or environment over it.
fn resolve(file: &str) -> Result<Settings, ConfigError> {
    Settings::resolve(
        FileConfig::parse(file, Path::new("x")).unwrap(),
        FileConfig::default(),
    )
}

#[test]
fn each_servers_cost_limits_default_to_electrumxs_and_are_refused_by_name() {
    let s = resolve("").unwrap();
    assert_eq!(s.electrum.cost, CostLimits::default());
    assert_eq!(s.http_cost, HTTP_COST_LIMITS);
    let s = resolve("http_cost_soft_limit = 5\nhttp_cost_hard_limit = 0\n").unwrap();
    assert_eq!((s.http_cost.soft, s.http_cost.hard), (5.0, 0.0));
    assert_eq!(
        s.electrum.cost,
        CostLimits::default(),
        "each server its own"
    );
    for (server, other) in [("electrum", "http"), ("http", "electrum")] {
        let err = resolve(&format!(
            "{server}_cost_soft_limit = 20\n{server}_cost_hard_limit = 20\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(&format!("{server}_cost_hard_limit"))
                && err.contains(&format!("{server}_cost_soft_limit"))
                && !err.contains(other),
            "{err}"
        );
        let err = resolve(&format!("{server}_cost_decay_per_sec = 0\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("{server}_cost_decay_per_sec")),
            "{err}"
        );
    }
    // No hard limit: no decay is needed.
    assert!(resolve("http_cost_hard_limit = 0\nhttp_cost_decay_per_sec = 0\n").is_ok());
}

#[test]
fn tls_listeners_take_default_ports_and_the_pair_goes_together() {
    let s = resolve(
        "network = \"regtest\"\nelectrum_tls_addr = \"0.0.0.0\"\nelectrum_wss_addr = \"\"\n",
    )
    .unwrap();
    assert_eq!(s.electrum.tls_addr, Some("0.0.0.0:60402".parse().unwrap()));
    assert_eq!(
        s.electrum.wss_addr,
        Some("127.0.0.1:60404".parse().unwrap())
    );
    assert_eq!(s.electrum.tls_files, None);
    let s = resolve("network = \"mainnet\"\nelectrum_tls_addr = \"[::1]\"\n").unwrap();
    assert_eq!(s.electrum.tls_addr, Some("[::1]:50002".parse().unwrap()));
    let s = resolve("network = \"signet\"\nelectrum_tls_addr = \"127.0.0.1:7\"\n").unwrap();
    assert_eq!(s.electrum.tls_addr, Some("127.0.0.1:7".parse().unwrap()));
    assert_eq!(Network::Testnet4.default_electrum_tls_port(), 60002);
    let err = resolve("electrum_tls_addr = \"example.com:50002\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("electrum_tls_addr"), "{err}");
    let err = resolve("tls_cert = \"/c.pem\"\n").unwrap_err().to_string();
    assert!(err.contains("tls_key"), "{err}");
    let s = resolve("tls_cert = \"/c.pem\"\ntls_key = \"/k.pem\"\n").unwrap();
    assert_eq!(
        s.electrum.tls_files,
        Some(("/c.pem".into(), "/k.pem".into()))
    );
}

#[test]
fn admin_must_be_loopback() {
    let over = FileConfig {
        admin_addr: Some("0.0.0.0:1".parse().unwrap()),
        ..Default::default()
    };
    assert!(Settings::resolve(FileConfig::default(), over).is_err());
}

#[test]
fn flags_take_lists_booleans_and_bare_listeners() {
    let flags = parse(&[
        "--network=regtest",
        "--connect=127.0.0.1:1",
        "--connect",
        "127.0.0.1:2,127.0.0.1:3",
        "--no-listen",
        "--dnsseed=false",
        "--block-filters",
        "--electrum-max-batch",
        "7",
        "--electrum-tls-addr",
    ])
    .unwrap();
    let s = Settings::resolve(FileConfig::default(), flags.options()).unwrap();
    assert_eq!(s.p2p.connect.len(), 3);
    assert_eq!(s.p2p.listen, None);
    assert!(!s.p2p.dns_seeds && s.block_filters);
    assert_eq!(s.electrum.max_batch, 7);
    assert_eq!(
        s.electrum.tls_addr,
        Some("127.0.0.1:60402".parse().unwrap())
    );
    assert_eq!(
        parse(&["--p2p-listen"]).unwrap().options.p2p_listen,
        Some(true)
    );
    assert!(parse(&["--dnsseed=maybe"]).is_err());
    assert!(parse(&["--tls-cert", "/c.pem"]).is_err(), "needs --tls-key");
}

#[test]
fn flags_win_over_the_file_option_by_option() {
    let file = FileConfig::parse(
        "connect = [\"127.0.0.1:1\"]\naddnode = [\"127.0.0.1:2\"]\np2p_listen = true\n\
         electrum_max_batch = 5\nmempool_max_mb = 2\n",
        Path::new("x"),
    )
    .unwrap();
    let flags = parse(&[
        "--connect=127.0.0.1:3",
        "--no-listen",
        "--electrum-max-batch=9",
    ]);
    let s = Settings::resolve(file, flags.unwrap().options()).unwrap();
    assert_eq!(
        s.p2p.connect,
        ["127.0.0.1:3".parse::<SocketAddr>().unwrap()]
    );
    assert_eq!(
        s.p2p.addnode,
        ["127.0.0.1:2".parse::<SocketAddr>().unwrap()]
    );
    assert_eq!(s.p2p.listen, None);
    assert_eq!(s.electrum.max_batch, 9);
    assert_eq!(s.mempool.max_bytes, 2_000_000);
}

/// `cairn`'s global flags alone.
#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    flags: Flags,
}

fn parse(args: &[&str]) -> Result<Flags, clap::Error> {
    let args = std::iter::once("cairn").chain(args.iter().copied());
    Cli::try_parse_from(args).map(|cli| cli.flags)
}

#[test]
fn mempool_policy_options_refuse_bad_values_by_name_and_apply_good_ones() {
    for (line, option, words) in [
        ("mempool_truc = \"sometimes\"", "mempool_truc", "sometimes"),
        (
            "mempool_min_relay_fee = 0.0",
            "mempool_min_relay_fee",
            "outside",
        ),
        (
            "mempool_min_relay_fee = 5000.0",
            "mempool_min_relay_fee",
            "outside",
        ),
        (
            "mempool_min_relay_fee = nan",
            "mempool_min_relay_fee",
            "outside",
        ),
        (
            "datacarrier_size = 100001",
            "datacarrier_size",
            "over 100000",
        ),
    ] {
        let file = FileConfig::parse(&format!("{line}\n"), Path::new("x")).unwrap();
        let err = Settings::resolve(file, FileConfig::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(option) && err.contains(words), "{line}: {err}");
    }
    // Wrong types are refused by the parser, naming the option.
    for line in [
        "permit_bare_pubkey = 1",
        "permit_multiple_datacarrier = \"yes\"",
    ] {
        let err = FileConfig::parse(&format!("{line}\n"), Path::new("x")).unwrap_err();
        let option = line.split(' ').next().unwrap_or_default();
        assert!(err.to_string().contains(option), "{line}: {err}");
    }
    // Core 31's policy unless told otherwise.
    let defaults = Settings::resolve(FileConfig::default(), FileConfig::default()).unwrap();
    assert_eq!(defaults.mempool.profile, PolicyProfile::Core);
    assert_eq!(defaults.mempool.truc, TrucPolicy::Enforce);
    assert_eq!(defaults.mempool.min_relay_per_kvb, 100);
    assert_eq!(defaults.mempool.datacarrier_size, 100_000);
    assert!(defaults.mempool.permit_bare_pubkey && defaults.mempool.permit_multiple_datacarrier);
    assert!(defaults.mempool.permit_bare_multisig && defaults.mempool.permit_bare_datacarrier);
    assert!(!defaults.mempool.knots_data_rules && defaults.mempool.clusters());
    // Knots's profile: every default is Knots 29.4's.
    let knots = FileConfig::parse("mempool_policy = \"knots\"\n", Path::new("x")).unwrap();
    let knots = Settings::resolve(knots, FileConfig::default()).unwrap();
    assert_eq!(knots.mempool.profile, PolicyProfile::Knots);
    assert_eq!(knots.mempool.truc, TrucPolicy::Accept);
    assert_eq!(knots.mempool.min_relay_per_kvb, 1_000);
    assert_eq!(knots.mempool.datacarrier_size, 83);
    assert!(!knots.mempool.permit_bare_pubkey && !knots.mempool.permit_multiple_datacarrier);
    assert!(knots.mempool.knots_data_rules && !knots.mempool.clusters());
    // Each knob on top of either profile; flags over the file.
    let file = FileConfig::parse(
        "mempool_policy = \"knots\"\nmempool_truc = \"enforce\"\nmempool_min_relay_fee = 0.1\n\
         datacarrier_size = 100000\npermit_bare_pubkey = true\npermit_multiple_datacarrier = true\n",
        Path::new("x"),
    )
    .unwrap();
    let s = Settings::resolve(file, FileConfig::default()).unwrap();
    assert_eq!(s.mempool.profile, PolicyProfile::Knots);
    assert_eq!(s.mempool.truc, TrucPolicy::Enforce);
    assert_eq!(s.mempool.min_relay_per_kvb, 100);
    assert_eq!(s.mempool.datacarrier_size, 100_000);
    assert!(s.mempool.permit_bare_pubkey && s.mempool.permit_multiple_datacarrier);
    assert!(s.mempool.knots_data_rules && !s.mempool.permit_bare_multisig);
    let file = FileConfig::parse(
        "knots_data_rules = true\nmempool_truc = \"accept\"\n",
        Path::new("x"),
    );
    let flags = FileConfig {
        mempool_truc: Some("reject".into()),
        ..Default::default()
    };
    let s = Settings::resolve(file.unwrap(), flags).unwrap();
    assert_eq!(s.mempool.profile, PolicyProfile::Core);
    assert!(s.mempool.knots_data_rules && s.mempool.clusters());
    assert_eq!(s.mempool.truc, TrucPolicy::Reject);
    let bad = FileConfig::parse("mempool_policy = \"bip110\"\n", Path::new("x")).unwrap();
    let err = Settings::resolve(bad, FileConfig::default()).unwrap_err();
    assert!(err.to_string().contains("mempool_policy"), "{err}");
}

#[test]
fn balancers_are_neither_everyone_nor_exempt_hosts() {
    let settings = |args: &[&str]| {
        let flags = parse(args).unwrap();
        Settings::resolve(FileConfig::default(), flags.options())
    };
    let ok = settings(&["--proxy-protocol-from=10.0.0.5,2001:db8::/64"]).unwrap();
    assert_eq!(ok.electrum.hosts.balancers.len(), 2);
    assert_eq!(ok.http_hosts.balancers, ok.electrum.hosts.balancers);
    assert_eq!(ok.p2p.inbound_balancers, ok.electrum.hosts.balancers);
    // The default exempt hosts are loopback's own address: a balancer there would share it.
    let err = settings(&["--proxy-protocol-from=127.0.0.1"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("overlaps host_limit_exempt"), "{err}");
    let apart = [
        "--proxy-protocol-from=127.0.0.1",
        "--host-limit-exempt=::1/128",
    ];
    assert!(settings(&apart).is_ok());
    let err = settings(&["--proxy-protocol-from=0.0.0.0/0"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("every address"), "{err}");
    let err = settings(&["--proxy-protocol-from=nonsense"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("proxy_protocol_from"), "{err}");
}
