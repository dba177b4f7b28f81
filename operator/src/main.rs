//! `sluice-operator`: the binary. Connects with the in-cluster service account or a kubeconfig
//! (`KUBECONFIG`, `~/.kube/config`), serves `/metrics` and `/health`, waits for the leader
//! Lease, then reconciles IngestTenants until SIGTERM/SIGINT, finishing in-flight reconciles
//! and releasing the Lease before it exits.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use kube::api::{Api, ListParams};
use kube::Client;
use sluice_operator::cancel::{cancel_pair, Cancel, Trigger};
use sluice_operator::controller::{self, Context, Options};
use sluice_operator::crd::IngestTenant;
use sluice_operator::leader::{LeaderElector, LeaseConfig};
use sluice_operator::metrics::Metrics;
use tracing::{error, info, warn};

#[derive(Parser, Debug)]
#[command(
    name = "sluice-operator",
    version,
    about = "Kubernetes operator for sluice IngestTenants"
)]
struct Args {
    /// Address of the /metrics and /health endpoints
    #[arg(
        long,
        env = "SLUICE_OPERATOR_METRICS_ADDR",
        default_value = "0.0.0.0:8080"
    )]
    metrics_addr: SocketAddr,
    /// Reconcile tenants of this namespace only (default: all namespaces)
    #[arg(long, env = "SLUICE_OPERATOR_NAMESPACE")]
    namespace: Option<String>,
    /// Reconcile without taking the leader Lease (only for a single replica)
    #[arg(long)]
    no_leader_election: bool,
    /// Name of the leader Lease
    #[arg(long, default_value = "sluice-operator")]
    lease_name: String,
    /// Namespace of the leader Lease (default: the pod's namespace, else the kubeconfig's)
    #[arg(long, env = "POD_NAMESPACE")]
    lease_namespace: Option<String>,
    /// This replica's identity in the Lease and in Events (default: the pod name or hostname)
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = std::env::var("SLUICE_LOG_FORMAT").is_ok_and(|v| v == "json");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// Fires the trigger on SIGTERM or SIGINT.
async fn signals(trigger: Arc<Trigger>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => {
            error!("cannot listen for signals");
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => info!("SIGTERM: shutting down"),
        _ = int.recv() => info!("SIGINT: shutting down"),
    }
    trigger.cancel();
}

fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "sluice-operator".into());
    format!("{host}-{}", std::process::id())
}

#[tokio::main]
async fn main() -> ExitCode {
    init_logging();
    let args = Args::parse();
    match run(args).await {
        Ok(code) => code,
        Err(e) => {
            error!("{e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<ExitCode, String> {
    let config = kube::Config::infer()
        .await
        .map_err(|e| format!("no Kubernetes configuration (in-cluster or kubeconfig): {e}"))?;
    let default_ns = config.default_namespace.clone();
    let client =
        Client::try_from(config).map_err(|e| format!("cannot build a Kubernetes client: {e}"))?;

    // Refuse to start without the CRD: watching a missing resource only logs errors forever.
    let probe: Api<IngestTenant> = match &args.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    probe
        .list(&ListParams::default().limit(1))
        .await
        .map_err(|e| {
            format!("cannot list IngestTenants ({e}); is crds/ingesttenant.yaml applied?")
        })?;

    let metrics = Metrics::new().map_err(|e| format!("metrics: {e}"))?;
    let (trigger, cancel) = cancel_pair();
    let trigger = Arc::new(trigger);
    tokio::spawn(signals(trigger.clone()));

    let http_cancel = cancel.clone();
    let http = tokio::spawn(sluice_operator::http::serve(
        args.metrics_addr,
        metrics.clone(),
        async move { http_cancel.cancelled().await },
    ));

    let identity = args.identity.clone().unwrap_or_else(default_identity);
    let options = Options {
        namespace: args.namespace.clone(),
        instance: identity.clone(),
        ..Options::default()
    };
    let ctx = Context::new(client.clone(), metrics.clone(), options);

    let code = if args.no_leader_election {
        warn!("leader election is off: run only one replica");
        metrics.leader.set(1);
        tokio::join!(
            controller::run(ctx.clone(), wait(cancel.clone())),
            autoscaler(ctx, wait(cancel.clone())),
        );
        ExitCode::SUCCESS
    } else {
        let lease_ns = args.lease_namespace.clone().unwrap_or(default_ns);
        let elector = LeaderElector::new(
            client.clone(),
            LeaseConfig::new(&args.lease_name, lease_ns, &identity),
        );
        lead(elector, ctx, &metrics, trigger.clone(), cancel.clone()).await
    };

    trigger.cancel();
    match http.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => warn!(error = %e, "metrics server failed"),
        Err(e) => warn!(error = %e, "metrics server task failed"),
    }
    Ok(code)
}

async fn wait(c: Cancel) {
    c.cancelled().await
}

/// The knee autoscaler, beside the reconciler under the same leadership: every 10 s it scrapes
/// the Ready pods of each tenant with `autoscaling.enabled`.
async fn autoscaler(ctx: Arc<Context>, stop: impl std::future::Future<Output = ()>) {
    let scrape = Arc::new(sluice_operator::autoscale::run::HttpScrape {
        timeout: Duration::from_secs(2),
    });
    sluice_operator::autoscale::run::run(ctx, scrape, Duration::from_secs(10), stop).await
}

/// Waits for the Lease, reconciles while holding it, and stops reconciling at once when it is
/// lost (exit code 1, so the pod restarts as a fresh candidate).
async fn lead(
    elector: LeaderElector,
    ctx: Arc<Context>,
    metrics: &Metrics,
    shutdown: Arc<Trigger>,
    cancel: Cancel,
) -> ExitCode {
    info!(
        identity = elector.identity(),
        "waiting for the leader Lease"
    );
    if !elector.acquire(&cancel).await {
        return ExitCode::SUCCESS;
    }
    metrics.leader.set(1);
    info!(
        identity = elector.identity(),
        "leading: reconciling IngestTenants"
    );
    let elector = Arc::new(elector);
    let (stop, stop_rx) = cancel_pair();
    let holder = {
        let elector = elector.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let kept = elector.hold(&cancel).await;
            stop.cancel();
            kept
        })
    };
    tokio::join!(
        controller::run(ctx.clone(), wait(stop_rx.clone())),
        autoscaler(ctx, wait(stop_rx)),
    );
    metrics.leader.set(0);
    let kept = holder.await.unwrap_or(false);
    if !kept {
        error!("lost the leader Lease: stopped reconciling");
        shutdown.cancel();
        return ExitCode::FAILURE;
    }
    // Graceful: hand over at once.
    match tokio::time::timeout(Duration::from_secs(5), elector.release()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => warn!(error = %e, "cannot release the leader Lease"),
        Err(_) => warn!("releasing the leader Lease timed out"),
    }
    ExitCode::SUCCESS
}
