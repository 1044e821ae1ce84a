//! The page's side of the analysis worker: spawns it with the page's own WASM module,
//! matches responses to requests, queues requests until the worker is ready, and
//! restarts it to cancel a parse or after it crashed (re-sending the other profiles' bytes).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use js_sys::{Array, Object, Reflect, Uint8Array};
use leptos::prelude::*;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{Blob, ErrorEvent, MessageEvent, Worker, WorkerOptions, WorkerType};

use super::protocol::{Envelope, FirstTree, Request, Response};

#[wasm_bindgen]
extern "C" {
    /// The URL of this module's wasm-bindgen glue, so the worker can import it.
    #[wasm_bindgen(thread_local_v2, js_namespace = ["import", "meta"], js_name = url)]
    static GLUE_URL: String;
}

type Reply = Box<dyn FnOnce(Response, Option<Vec<u8>>)>;
type MessageHandler = Closure<dyn FnMut(MessageEvent)>;
type ErrorHandler = Closure<dyn FnMut(ErrorEvent)>;

pub struct Client {
    worker: RefCell<Option<Worker>>,
    ready: Cell<bool>,
    outbox: RefCell<Vec<(String, Option<Blob>)>>,
    next_seq: Cell<u64>,
    pending: RefCell<HashMap<u64, Reply>>,
    /// Progress, Parsed and Failed go here, keyed by profile id inside the message.
    on_event: RefCell<Rc<dyn Fn(Response)>>,
    /// Each loaded profile's bytes (a chosen file's own `Blob`: never copied into the
    /// page), to repopulate a restarted worker.
    sources: RefCell<Vec<(u32, String, Blob)>>,
    /// Profiles sent to parse and not yet Parsed or Failed, in the order the worker takes them.
    parsing: RefCell<Vec<u32>>,
    /// Bumped when the worker restarts: views depending on it ask again.
    pub generation: RwSignal<u32>,
    /// Kept alive while the worker may call them.
    on_message: RefCell<Option<MessageHandler>>,
    on_error: RefCell<Option<ErrorHandler>>,
}

impl Client {
    /// A client whose worker starts with [`Client::start`], once the receiver of its
    /// events exists.
    pub fn new() -> Rc<Self> {
        Rc::new(Client {
            worker: RefCell::new(None),
            ready: Cell::new(false),
            outbox: RefCell::new(Vec::new()),
            next_seq: Cell::new(1),
            pending: RefCell::new(HashMap::new()),
            on_event: RefCell::new(Rc::new(|_| {})),
            sources: RefCell::new(Vec::new()),
            parsing: RefCell::new(Vec::new()),
            generation: RwSignal::new(0),
            on_message: RefCell::new(None),
            on_error: RefCell::new(None),
        })
    }

    /// Starts the worker; its events go to `on_event`.
    pub fn start(self: &Rc<Self>, on_event: impl Fn(Response) + 'static) {
        *self.on_event.borrow_mut() = Rc::new(on_event);
        self.spawn();
    }

    /// Hands an event to the page, not holding the handler's cell while it runs.
    fn emit(&self, event: Response) {
        let on_event = self.on_event.borrow().clone();
        on_event(event);
    }

    fn spawn(self: &Rc<Self>) {
        let glue = GLUE_URL.with(Clone::clone);
        let script =
            web_sys::Url::new_with_base("worker.js", &glue).map(|u| u.href()).unwrap_or_else(|_| "worker.js".into());
        let options = WorkerOptions::new();
        options.set_type(WorkerType::Module);
        let worker = match Worker::new_with_options(&script, &options) {
            Ok(w) => w,
            Err(e) => {
                self.emit(Response::Failed {
                    id: u32::MAX,
                    message: format!("cannot start the analysis worker: {e:?}"),
                });
                return;
            }
        };
        let weak = Rc::downgrade(self);
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |e: MessageEvent| {
            if let Some(client) = weak.upgrade() {
                client.receive(e);
            }
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        // A panic in the worker's WASM (a bug, or memory the browser refuses) surfaces here;
        // the worker is then in no state to go on.
        let weak = Rc::downgrade(self);
        let on_error = Closure::<dyn FnMut(ErrorEvent)>::new(move |e: ErrorEvent| {
            if let Some(client) = weak.upgrade() {
                client.crashed(&e.message());
            }
        });
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        let init = Object::new();
        let _ = Reflect::set(&init, &"glue".into(), &glue.into());
        let _ = Reflect::set(&init, &"module".into(), &wasm_bindgen::module());
        let _ = worker.post_message(&init);
        *self.on_message.borrow_mut() = Some(on_message);
        *self.on_error.borrow_mut() = Some(on_error);
        *self.worker.borrow_mut() = Some(worker);
        self.ready.set(false);
    }

    fn receive(&self, e: MessageEvent) {
        let data: Array = e.data().unchecked_into();
        let Some(json) = data.get(0).as_string() else { return };
        let bytes = data.get(1).dyn_into::<Uint8Array>().ok().map(|a| a.to_vec());
        let Ok(envelope) = serde_json::from_str::<Envelope<Response>>(&json) else { return };
        match envelope.body {
            Response::Ready => {
                self.ready.set(true);
                // A hook for automated checks: the page can analyse from now on.
                if let Some(body) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.body()) {
                    let _ = body.set_attribute("data-worker-ready", "true");
                }
                let queued = std::mem::take(&mut *self.outbox.borrow_mut());
                for (json, source) in queued {
                    self.post(&json, source);
                }
            }
            body @ (Response::Parsed { id, .. } | Response::Failed { id, .. } | Response::SymbolFile { id, .. }) => {
                self.parsing.borrow_mut().retain(|&p| p != id);
                self.emit(body)
            }
            body @ (Response::Progress { .. } | Response::Symbolized { .. }) => self.emit(body),
            body => {
                if let Some(reply) = self.pending.borrow_mut().remove(&envelope.seq) {
                    reply(body, bytes);
                }
            }
        }
    }

    /// Posts a request; a `Blob` goes by reference, its bytes are read in the worker.
    fn post(&self, json: &str, source: Option<Blob>) {
        let Some(worker) = self.worker.borrow().clone() else { return };
        let message = Array::of1(&JsValue::from_str(json));
        if let Some(blob) = source {
            message.push(&blob);
        }
        let _ = worker.post_message(&message);
    }

    fn send(&self, request: &Request, source: Option<Blob>) -> u64 {
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        let json = serde_json::to_string(&Envelope { seq, body: request }).expect("requests serialize");
        if self.ready.get() {
            self.post(&json, source);
        } else {
            self.outbox.borrow_mut().push((json, source));
        }
        seq
    }

    /// Hands a profile to the worker; its outcome arrives as Parsed or Failed.
    pub fn parse(&self, id: u32, name: &str, source: Blob, first_tree: Option<FirstTree>) {
        self.sources.borrow_mut().push((id, name.to_owned(), source.clone()));
        self.parsing.borrow_mut().push(id);
        self.send(&Request::Parse { id, name: name.to_owned(), first_tree }, Some(source));
    }

    /// The bytes a profile was loaded from (what Share uploads).
    pub fn source(&self, id: u32) -> Option<Blob> {
        self.sources.borrow().iter().find(|s| s.0 == id).map(|s| s.2.clone())
    }

    /// Forgets a profile. A worker's WebAssembly memory only grows, so closing the last
    /// profile, or a large one, replaces the worker (given the other profiles again),
    /// which hands the memory back to the browser.
    pub fn remove(self: &Rc<Self>, id: u32) {
        let (size, others) = {
            let sources = self.sources.borrow();
            (sources.iter().find(|s| s.0 == id).map_or(0.0, |s| s.2.size()), sources.iter().any(|s| s.0 != id))
        };
        if !others || size >= Self::LARGE_SOURCE {
            self.restart_without(Some(id));
        } else {
            self.sources.borrow_mut().retain(|s| s.0 != id);
            self.send(&Request::Remove { id }, None);
        }
    }

    /// A profile this large (as loaded, often gzipped) takes tens of MB or more in the worker.
    const LARGE_SOURCE: f64 = 1_048_576.0;

    pub fn request(&self, request: Request, reply: impl FnOnce(Response, Option<Vec<u8>>) + 'static) {
        let seq = self.send(&request, None);
        self.pending.borrow_mut().insert(seq, Box::new(reply));
    }

    /// Stops a parse in progress: the worker is replaced and given the other profiles again.
    pub fn cancel(self: &Rc<Self>, id: u32) {
        self.restart_without(Some(id));
    }

    /// The worker died: the parse it was on (the first one sent and not answered) is
    /// reported as failed, and a new worker gets the other profiles. A crash outside a
    /// parse restarts the worker with every profile, and the views ask again.
    fn crashed(self: &Rc<Self>, message: &str) {
        let culprit = self.parsing.borrow().first().copied();
        let name = culprit.and_then(|id| self.sources.borrow().iter().find(|s| s.0 == id).map(|s| s.1.clone()));
        self.restart_without(culprit);
        let message = match (culprit, name) {
            (Some(id), Some(name)) => (id, format!("{name}: the analysis stopped while reading this file ({message})")),
            _ => (u32::MAX, format!("the analysis worker stopped ({message}) and was restarted")),
        };
        self.emit(Response::Failed { id: message.0, message: message.1 });
    }

    fn restart_without(self: &Rc<Self>, id: Option<u32>) {
        if let Some(w) = self.worker.borrow_mut().take() {
            w.terminate();
        }
        self.pending.borrow_mut().clear();
        self.outbox.borrow_mut().clear();
        self.parsing.borrow_mut().clear();
        self.sources.borrow_mut().retain(|s| Some(s.0) != id);
        self.spawn();
        let again: Vec<(u32, String, Blob)> = self.sources.borrow().clone();
        for (id, name, source) in again {
            self.parsing.borrow_mut().push(id);
            // The page asks again for what it shows: nothing is built ahead.
            self.send(&Request::Parse { id, name, first_tree: None }, Some(source));
        }
        self.generation.update(|g| *g += 1);
    }
}
