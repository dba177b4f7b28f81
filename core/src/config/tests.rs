use super::*;

#[test]
fn durations_parse_and_render() {
    assert_eq!(
        parse_duration("30d").unwrap(),
        Duration::from_secs(30 * 86400)
    );
    assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
    assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
    assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
    for bad in [
        "",
        "d",
        "10",
        "1y",
        "-1s",
        "1.5h",
        "99999999999999999999999w",
    ] {
        assert!(parse_duration(bad).is_err(), "{bad} should be refused");
    }
}

#[test]
fn retention_zero_and_inf_are_infinite() {
    assert_eq!(
        "inf".parse::<RetentionDuration>().unwrap(),
        RetentionDuration(None)
    );
    assert_eq!(
        "0s".parse::<RetentionDuration>().unwrap(),
        RetentionDuration(None)
    );
    assert_eq!("7d".parse::<RetentionDuration>().unwrap().to_string(), "7d");
}

#[test]
fn sizes_parse() {
    assert_eq!("64MiB".parse::<ByteSize>().unwrap(), ByteSize(64 << 20));
    assert_eq!("64Mi".parse::<ByteSize>().unwrap(), ByteSize(64 << 20));
    assert_eq!("1GB".parse::<ByteSize>().unwrap(), ByteSize(1_000_000_000));
    assert_eq!("123".parse::<ByteSize>().unwrap(), ByteSize(123));
    assert!("12 parsecs".parse::<ByteSize>().is_err());
    assert_eq!(ByteSize(64 << 20).to_string(), "64MiB");
}

#[test]
fn toml_round_trip_and_autogen_default() {
    let mut cfg = ServerConfig {
        databases: vec![DatabaseConfig {
            name: "telegraf".into(),
            retention_policies: vec![],
        }],
        ..Default::default()
    };
    cfg.validate().unwrap();
    assert_eq!(
        cfg.databases[0].retention_policies,
        vec![RetentionPolicyConfig::autogen()]
    );
}

#[test]
fn validation_names_the_problem() {
    let mut cfg = ServerConfig {
        databases: vec![DatabaseConfig {
            name: "db".into(),
            retention_policies: vec![
                RetentionPolicyConfig {
                    name: "a".into(),
                    duration: RetentionDuration(None),
                    default: true,
                },
                RetentionPolicyConfig {
                    name: "b".into(),
                    duration: RetentionDuration(None),
                    default: true,
                },
            ],
        }],
        ..Default::default()
    };
    let err = cfg.validate().unwrap_err().to_string();
    assert!(err.contains("exactly one retention policy"), "{err}");

    let mut cfg = ServerConfig {
        databases: vec![DatabaseConfig {
            name: "bad name".into(),
            retention_policies: vec![],
        }],
        ..Default::default()
    };
    assert!(cfg.validate().unwrap_err().to_string().contains("bad name"));
}

#[test]
fn env_overrides() {
    let mut cfg = ServerConfig::default();
    apply_env(
        &mut cfg,
        [
            ("SLUICE_LISTEN", "0.0.0.0:9000"),
            ("SLUICE_POOL_FLUSH_INTERVAL", "250ms"),
            ("SLUICE_LIMITS_MAX_BODY_BYTES", "1Mi"),
            ("SLUICE_LIMITS_WAL_MEMTABLE_BYTES", "64MiB"),
            ("SLUICE_LIMITS_PRETOUCH_BYTES", "0"),
            ("SLUICE_AUTH_TOKENS", "a, b"),
            ("SLUICE_DATABASES", "telegraf:autogen=30d*,raw=7d;metrics"),
            ("PATH", "/bin"),
        ],
    )
    .unwrap();
    assert_eq!(cfg.listen, "0.0.0.0:9000");
    assert_eq!(cfg.pool.flush_interval, Duration::from_millis(250));
    assert_eq!(cfg.limits.max_body_bytes, ByteSize(1 << 20));
    assert_eq!(cfg.limits.wal_memtable_bytes, ByteSize(64 << 20));
    assert_eq!(cfg.limits.pretouch_bytes, ByteSize(0));
    assert_eq!(cfg.auth.tokens, vec!["a", "b"]);
    assert_eq!(cfg.databases.len(), 2);
    assert!(cfg.databases[0].retention_policies[0].default);
    assert_eq!(
        cfg.databases[0].retention_policies[1].duration,
        RetentionDuration(Some(Duration::from_secs(7 * 86400)))
    );
    cfg.validate().unwrap();
    assert_eq!(cfg.databases[1].retention_policies[0].name, "autogen");

    let err = apply_env(&mut cfg, [("SLUICE_POOL_CONNECTIONS", "many")]).unwrap_err();
    assert!(err.to_string().contains("SLUICE_POOL_CONNECTIONS"));
    let unknown = apply_env(&mut cfg, [("SLUICE_NOPE", "1"), ("SLUICE_LOG", "x")]).unwrap();
    assert_eq!(unknown, vec!["SLUICE_NOPE"]);

    apply_env(&mut cfg, [("SLUICE_LIMITS_WAL_MEMTABLE_BYTES", "64KiB")]).unwrap();
    let err = cfg.validate().unwrap_err().to_string();
    assert!(
        err.contains("limits.wal_memtable_bytes") && err.contains("1MiB"),
        "{err}"
    );
}

#[test]
fn a_cluster_tag_is_read_from_the_environment_and_checked() {
    let mut cfg = ServerConfig::default();
    assert!(cfg.series.is_plain());
    apply_env(&mut cfg, [("SLUICE_SERIES_CLUSTER_TAG", "region")]).unwrap();
    cfg.validate().unwrap();
    assert_eq!(cfg.series.cluster_tag.as_deref(), Some("region"));
    apply_env(&mut cfg, [("SLUICE_SERIES_CLUSTER_TAG", "")]).unwrap();
    assert!(cfg.series.is_plain());
    cfg.series.cluster_tag = Some("time".into());
    let err = cfg.validate().unwrap_err().to_string();
    assert!(err.contains("series.cluster_tag \"time\""), "{err}");
}
