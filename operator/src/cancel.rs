//! A tiny cancellation token (a watch channel): shutdown and lost leadership both stop the
//! controller through it. Avoids a tokio-util dependency for one type.

use tokio::sync::watch;

#[derive(Clone)]
pub struct Cancel {
    rx: watch::Receiver<bool>,
}

pub struct Trigger {
    tx: watch::Sender<bool>,
}

pub fn cancel_pair() -> (Trigger, Cancel) {
    let (tx, rx) = watch::channel(false);
    (Trigger { tx }, Cancel { rx })
}

impl Trigger {
    pub fn cancel(&self) {
        let _ = self.tx.send(true);
    }
}

impl Cancel {
    pub fn is_cancelled(&self) -> bool {
        *self.rx.borrow()
    }
    /// Resolves once `cancel` was called (or the trigger dropped).
    pub async fn cancelled(&self) {
        let mut rx = self.rx.clone();
        loop {
            if *rx.borrow_and_update() {
                return;
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }
}
