//! A fixed pool of particles animated frame by frame; dead particles are removed and their slots
//! recycled by new ones (the Game Programming Patterns particle system, on a poolalloc `Pool`).
//!
//! `cargo run --example particles`

use poolalloc::Pool;

#[global_allocator]
static GLOBAL: poolalloc::PoolAlloc = poolalloc::PoolAlloc::new();

struct Particle {
    x: f32,
    y: f32,
    vx: f32,
    vy: f32,
    frames_left: u32,
}

fn main() {
    let mut particles: Pool<Particle> = Pool::fixed(1000);
    let mut seed = 7u32;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        (seed % 1000) as f32 / 1000.0
    };
    let mut dropped = 0;
    for frame in 0..300 {
        // Emit a burst; a full pool refuses the extras instead of growing.
        for _ in 0..20 {
            let p = Particle {
                x: 0.0,
                y: 0.0,
                vx: rnd() - 0.5,
                vy: rnd() * 2.0,
                frames_left: 20 + (rnd() * 60.0) as u32,
            };
            if particles.try_insert(p).is_err() {
                dropped += 1;
            }
        }
        // Animate every live particle; collect the dead ones.
        let mut dead = Vec::new();
        for (h, p) in particles.iter_mut() {
            p.x += p.vx;
            p.y += p.vy;
            p.vy -= 0.05;
            p.frames_left -= 1;
            if p.frames_left == 0 {
                dead.push(h);
            }
        }
        for h in dead {
            particles.remove(h);
        }
        if frame % 50 == 0 {
            println!("frame {frame:3}: {:4} live particles", particles.len());
        }
    }
    println!("{dropped} particles not emitted because the pool was full");
    println!("{}", poolalloc::stats());
}
