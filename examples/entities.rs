//! Several entity types, each in its own typed pool, referenced by handles from a stack of values —
//! the way a scripting engine (the Om engine the project grew from) keeps objects alive by handle.
//! A handle to a destroyed entity is stale and found as such, never as another entity.
//!
//! `cargo run --example entities`

use poolalloc::{Handle, Pool};

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

struct Player {
    name: String,
    hp: i32,
}
struct Door {
    open: bool,
    opened_by: Option<Handle<Player>>,
}

/// A script value: numbers, strings, or references to entities by handle.
#[derive(Debug, Clone)]
enum Value {
    Num(f64),
    Str(String),
    Player(Handle<Player>),
    Door(Handle<Door>),
}

struct World {
    players: Pool<Player>,
    doors: Pool<Door>,
    stack: Vec<Value>,
}

impl World {
    fn describe(&self, v: &Value) -> String {
        match v {
            Value::Num(n) => format!("{n}"),
            Value::Str(s) => format!("{s:?}"),
            Value::Player(h) => match self.players.get(*h) {
                Some(p) => format!("player {} ({} hp)", p.name, p.hp),
                None => format!("stale player {h:?}"),
            },
            Value::Door(h) => match self.doors.get(*h) {
                Some(d) => {
                    let by = d
                        .opened_by
                        .and_then(|p| self.players.get(p))
                        .map(|p| p.name.as_str());
                    format!("door, open: {}, opened by {by:?}", d.open)
                }
                None => format!("stale door {h:?}"),
            },
        }
    }
}

fn main() {
    let mut w = World {
        players: Pool::new(),
        doors: Pool::new(),
        stack: Vec::new(),
    };
    let ann = w.players.insert(Player {
        name: "Ann".into(),
        hp: 10,
    });
    let bob = w.players.insert(Player {
        name: "Bob".into(),
        hp: 7,
    });
    let door = w.doors.insert(Door {
        open: false,
        opened_by: None,
    });
    w.stack.extend([
        Value::Player(ann),
        Value::Player(bob),
        Value::Door(door),
        Value::Num(3.0),
    ]);

    // A script opens the door as Bob, then Bob leaves the game.
    if let Some(d) = w.doors.get_mut(door) {
        d.open = true;
        d.opened_by = Some(bob);
    }
    w.players.remove(bob);
    // A new player takes Bob's slot; old handles to Bob must not find her.
    let cat = w.players.insert(Player {
        name: "Cat".into(),
        hp: 12,
    });
    w.stack.push(Value::Player(cat));
    w.stack.push(Value::Str("done".into()));

    for v in &w.stack {
        println!("{}", w.describe(v));
    }
    assert!(w.players.get(bob).is_none());
    assert_eq!(
        bob.index(),
        cat.index(),
        "Cat reuses Bob's slot with a new generation"
    );
    let handles: Vec<u64> = w.players.iter().map(|(h, _)| h.to_bits()).collect();
    println!("live player handles as bits: {handles:x?}");
}
