//! Every built-in PS function, run on the servers and checked against the same computation
//! done locally, on dense and sparse matrices.

use angel_client::{MatrixSpec, PsError, ValueType};
use angel_tests::Cluster;

const N: usize = 1000;

type Op = fn(f64, f64) -> f64;

fn close(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "got {got}, want {want}"
    );
}

#[tokio::test]
async fn dense_functions_match_local_results() {
    let cluster = Cluster::start(2);
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::dense("d", 4, N as u64).value_type(ValueType::F64))
        .await
        .unwrap();
    let x: Vec<f64> = (0..N).map(|i| ((i * 37) % 101) as f64 - 50.0).collect();
    let y: Vec<f64> = (0..N).map(|i| ((i * 11) % 13) as f64 + 1.0).collect();
    c.push_row("d", 0, &x).await.unwrap();
    c.push_row("d", 1, &y).await.unwrap();
    let one = |name: &'static str| {
        let c = c.clone();
        async move { c.psf(name, &[("d", 0)], &[]).await.unwrap()[0] }
    };
    close(one("sum").await, x.iter().sum());
    close(
        one("nnz").await,
        x.iter().filter(|v| **v != 0.0).count() as f64,
    );
    close(
        one("norm2").await,
        x.iter().map(|v| v * v).sum::<f64>().sqrt(),
    );
    close(
        one("min").await,
        x.iter().cloned().fold(f64::INFINITY, f64::min),
    );
    close(
        one("max").await,
        x.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
    );
    let dot = c.psf("dot", &[("d", 0), ("d", 1)], &[]).await.unwrap()[0];
    close(dot, x.iter().zip(&y).map(|(a, b)| a * b).sum());

    let row = |r: u64| {
        let c = c.clone();
        async move { c.pull_rows::<f64>("d", &[r]).await.unwrap().remove(0) }
    };
    let binaries: [(&str, Op); 4] = [
        ("add", |a, b| a + b),
        ("sub", |a, b| a - b),
        ("mul", |a, b| a * b),
        ("div", |a, b| a / b),
    ];
    for (name, op) in binaries {
        c.psf(name, &[("d", 0), ("d", 1), ("d", 3)], &[])
            .await
            .unwrap();
        let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| op(*a, *b)).collect();
        assert_eq!(row(3).await, want, "{name}");
    }
    c.psf("scale", &[("d", 3)], &[0.5]).await.unwrap();
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a / b * 0.5).collect();
    assert_eq!(row(3).await, want, "scale");

    c.psf("copy", &[("d", 0), ("d", 2)], &[]).await.unwrap();
    assert_eq!(row(2).await, x, "copy");
    c.psf("axpy", &[("d", 1), ("d", 2)], &[-3.0]).await.unwrap();
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a - 3.0 * b).collect();
    assert_eq!(row(2).await, want, "axpy");
    c.psf("fill", &[("d", 2)], &[2.5]).await.unwrap();
    assert!(row(2).await.iter().all(|&v| v == 2.5), "fill");
    c.psf("zero", &[("d", 2)], &[]).await.unwrap();
    assert!(row(2).await.iter().all(|&v| v == 0.0), "zero");

    c.psf("random_uniform", &[("d", 2)], &[-1.0, 1.0, 9.0])
        .await
        .unwrap();
    let u = row(2).await;
    assert!(u.iter().all(|v| (-1.0..1.0).contains(v)));
    let mean = u.iter().sum::<f64>() / N as f64;
    assert!(mean.abs() < 0.1, "uniform mean {mean}");
    c.psf("random_uniform", &[("d", 2)], &[-1.0, 1.0, 9.0])
        .await
        .unwrap();
    assert_eq!(row(2).await, u, "the same seed gives the same values");
    // Seeds that differ as the rows do (seed ^ row) once gave every row the same stream.
    c.psf("random_uniform", &[("d", 1)], &[-1.0, 1.0, (9 ^ 1) as f64])
        .await
        .unwrap();
    c.psf("random_uniform", &[("d", 2)], &[-1.0, 1.0, (9 ^ 2) as f64])
        .await
        .unwrap();
    assert_ne!(
        row(1).await,
        row(2).await,
        "rows draw from streams of their own"
    );

    c.psf("random_normal", &[("d", 2)], &[3.0, 2.0, 1.0])
        .await
        .unwrap();
    let g = row(2).await;
    let mean = g.iter().sum::<f64>() / N as f64;
    let sd = (g.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / N as f64).sqrt();
    assert!(
        (mean - 3.0).abs() < 0.2 && (sd - 2.0).abs() < 0.2,
        "normal mean {mean} sd {sd}"
    );
}

#[tokio::test]
async fn sparse_functions_match_local_results() {
    let cluster = Cluster::start(2);
    let c = cluster.client().await;
    // Past 2^53: `nonzeros` must name its columns exactly.
    let cols = 1u64 << 62;
    c.create_matrix(MatrixSpec::sparse("s", 3, cols))
        .await
        .unwrap();
    let xk: Vec<u64> = (0..200).map(|i| i * (cols / 200) + 3).collect();
    let xv: Vec<f32> = (0..200).map(|i| i as f32 - 20.0).collect();
    let yk: Vec<u64> = xk
        .iter()
        .step_by(2)
        .copied()
        .chain([5, 7, cols - 1])
        .collect();
    let yv: Vec<f32> = (0..yk.len()).map(|i| 1.0 + i as f32).collect();
    c.push_keys("s", 0, &xk, &xv).await.unwrap();
    c.push_keys("s", 1, &yk, &yv).await.unwrap();
    let x = |k: u64| {
        xk.iter()
            .position(|&q| q == k)
            .map_or(0.0, |i| f64::from(xv[i]))
    };
    let y = |k: u64| {
        yk.iter()
            .position(|&q| q == k)
            .map_or(0.0, |i| f64::from(yv[i]))
    };

    let one = |name: &'static str| {
        let c = c.clone();
        async move { c.psf(name, &[("s", 0)], &[]).await.unwrap()[0] }
    };
    close(one("sum").await, xk.iter().map(|&k| x(k)).sum());
    close(one("nnz").await, 199.0);
    close(
        one("norm2").await,
        xk.iter().map(|&k| x(k) * x(k)).sum::<f64>().sqrt(),
    );
    close(one("min").await, -20.0);
    close(one("max").await, 179.0);
    let dot = c.psf("dot", &[("s", 0), ("s", 1)], &[]).await.unwrap()[0];
    close(dot, xk.iter().map(|&k| x(k) * y(k)).sum());

    let union: Vec<u64> = xk.iter().chain(&yk).copied().collect();
    let pull = |r: u64| {
        let (c, union) = (c.clone(), union.clone());
        async move {
            let v: Vec<f32> = c.pull_keys("s", r, &union).await.unwrap();
            v.into_iter().map(f64::from).collect::<Vec<_>>()
        }
    };
    let local = |f: &dyn Fn(u64) -> f64| union.iter().map(|&k| f(k)).collect::<Vec<_>>();
    c.psf("add", &[("s", 0), ("s", 1), ("s", 2)], &[])
        .await
        .unwrap();
    assert_eq!(pull(2).await, local(&|k| x(k) + y(k)), "add");
    c.psf("mul", &[("s", 0), ("s", 1), ("s", 2)], &[])
        .await
        .unwrap();
    assert_eq!(pull(2).await, local(&|k| x(k) * y(k)), "mul");
    let nnz = c.psf("nnz", &[("s", 2)], &[]).await.unwrap()[0];
    assert_eq!(nnz, 99.0, "mul keeps only keys stored in both");
    c.psf("copy", &[("s", 1), ("s", 2)], &[]).await.unwrap();
    c.psf("axpy", &[("s", 0), ("s", 2)], &[2.0]).await.unwrap();
    c.psf("scale", &[("s", 2)], &[-1.0]).await.unwrap();
    assert_eq!(
        pull(2).await,
        local(&|k| -(y(k) + 2.0 * x(k))),
        "copy, axpy, scale"
    );
    c.psf("zero", &[("s", 2)], &[]).await.unwrap();
    assert_eq!(c.psf("nnz", &[("s", 2)], &[]).await.unwrap()[0], 0.0);

    // `nonzeros`: row 0's elements that are not zero in a column range, from every partition.
    let (from, to) = (cols / 4, 3 * cols / 4);
    let mut got = c.nonzeros(("s", 0), from..to, 0).await.unwrap();
    got.sort_unstable_by_key(|p| p.0);
    let want: Vec<(u64, f64)> = (xk.iter().filter(|k| (from..to).contains(*k)))
        .filter(|&&k| x(k) != 0.0)
        .map(|&k| (k, x(k)))
        .collect();
    assert!(want.len() > 50);
    assert_eq!(got, want, "nonzeros");
    // Paged block by block, at most 7 pairs a call (each block's lowest): the pages add up
    // to the whole range.
    let m = c.matrix("s").await.unwrap();
    let band = m.layout.band(0).unwrap();
    let mut paged = Vec::new();
    for pos in 0..band.len() {
        let block = band.cols(pos);
        let mut start = block.start.max(from);
        while start < block.end.min(to) {
            let page = (c.nonzeros(("s", 0), start..block.end.min(to), 7).await).unwrap();
            assert!(page.len() <= 7, "at most 7 a block: {}", page.len());
            assert!(page.windows(2).all(|w| w[0].0 < w[1].0), "ascending");
            start = match page.len() {
                7 => page[6].0 + 1,
                _ => block.end,
            };
            paged.extend(page);
        }
    }
    paged.sort_unstable_by_key(|p| p.0);
    assert_eq!(paged, want, "nonzeros, paged");
    let err = c
        .psf("nonzeros", &[("s", 0)], &[0.0, 5.0, 0.0, 1.0, 0.0])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nonzeros"), "{err}");

    let err = c
        .psf("random_uniform", &[("s", 2)], &[0.0, 1.0, 1.0])
        .await
        .unwrap_err();
    assert!(
        matches!(err, PsError::InvalidArgument(ref m) if m.contains("sparse")),
        "{err}"
    );
}

#[tokio::test]
async fn operands_must_share_a_layout_and_functions_must_exist() {
    let cluster = Cluster::start(2);
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::dense("a", 1, 100))
        .await
        .unwrap();
    c.create_matrix(MatrixSpec::dense("b", 1, 90))
        .await
        .unwrap();
    let err = c.psf("dot", &[("a", 0), ("b", 0)], &[]).await.unwrap_err();
    assert!(
        matches!(err, PsError::InvalidArgument(ref m) if m.contains("partitioned differently")),
        "{err}"
    );
    let err = c.psf("no_such_fn", &[("a", 0)], &[]).await.unwrap_err();
    assert!(
        matches!(err, PsError::NotFound(ref m) if m.contains("no_such_fn") && m.contains("axpy")),
        "{err}"
    );
    let err = c.psf("axpy", &[("a", 0)], &[1.0]).await.unwrap_err();
    assert!(
        matches!(err, PsError::InvalidArgument(ref m) if m.contains("takes 2 operand")),
        "{err}"
    );
    let err = c.psf("scale", &[("a", 0)], &[]).await.unwrap_err();
    assert!(
        matches!(err, PsError::InvalidArgument(ref m) if m.contains("argument 0")),
        "{err}"
    );
}

/// OWL-QN's functions and `asum`, on a dense and a sparse matrix, against their definitions
/// written here: the pseudo-gradient of `f + l1 |x|_1` from `f`'s gradient, the direction
/// zeroed where it does not descend along it, a step projected onto the start's orthant;
/// columns from `free` on (intercepts) unpenalised and never projected.
#[tokio::test]
async fn orthant_functions_match_their_definitions() {
    let cluster = Cluster::start(2);
    let c = cluster.client().await;
    let (l1, free) = (0.5, N as u64 - 10);
    // Zeros in every row, and gradients on either side of l1 where x is zero.
    let x: Vec<f64> = (0..N)
        .map(|i| ((i % 7) as f64 - 3.0) * f64::from(i % 3 != 0))
        .collect();
    let g: Vec<f64> = (0..N).map(|i| ((i * 13) % 9) as f64 / 4.0 - 1.0).collect();
    let d: Vec<f64> = (0..N).map(|i| ((i * 5) % 11) as f64 - 5.0).collect();
    let pseudo = |i: usize| match (x[i], g[i]) {
        _ if i as u64 >= free => g[i],
        (x, g) if x > 0.0 => g + l1,
        (x, g) if x < 0.0 => g - l1,
        (_, g) if g + l1 < 0.0 => g + l1,
        (_, g) if g - l1 > 0.0 => g - l1,
        _ => 0.0,
    };
    let pg: Vec<f64> = (0..N).map(pseudo).collect();
    let kept = |i: usize| i as u64 >= free || d[i] * pg[i] < 0.0;
    let want_d: Vec<f64> = (0..N).map(|i| if kept(i) { d[i] } else { 0.0 }).collect();
    // w = x + d, then zero where it left x's orthant (-pg's where x is zero).
    let w: Vec<f64> = (0..N).map(|i| x[i] + d[i]).collect();
    let orthant = |i: usize| if x[i] != 0.0 { x[i] } else { -pg[i] };
    let stays = |i: usize| i as u64 >= free || w[i] * orthant(i) > 0.0;
    let want_w: Vec<f64> = (0..N).map(|i| if stays(i) { w[i] } else { 0.0 }).collect();
    for (name, spec) in [
        ("dense", MatrixSpec::dense("od", 5, N as u64)),
        ("sparse", MatrixSpec::sparse("os", 5, N as u64)),
    ] {
        let m = spec.value_type(ValueType::F64).block_shape(5, 300);
        let m = c.create_matrix(m).await.unwrap().meta.name.clone();
        let keys: Vec<u64> = (0..N as u64).collect();
        for (row, values) in [(0, &x), (1, &g), (3, &d), (4, &w)] {
            c.push_keys(&m, row, &keys, values).await.unwrap();
        }
        let at = |r: u64| (m.as_str(), r);
        let row = |r: u64| {
            let (c, m) = (c.clone(), m.clone());
            async move {
                c.pull_keys::<f64>(&m, r, &(0..N as u64).collect::<Vec<_>>())
                    .await
                    .unwrap()
            }
        };
        c.psf(
            "pseudo_gradient",
            &[at(0), at(1), at(2)],
            &[l1, free as f64],
        )
        .await
        .unwrap();
        assert_eq!(row(2).await, pg, "{name}: pseudo_gradient");
        c.psf("orthant_direction", &[at(3), at(2)], &[free as f64])
            .await
            .unwrap();
        assert_eq!(row(3).await, want_d, "{name}: orthant_direction");
        c.psf("orthant_project", &[at(4), at(0), at(2)], &[free as f64])
            .await
            .unwrap();
        assert_eq!(row(4).await, want_w, "{name}: orthant_project");
        let asum = c.psf("asum", &[at(0)], &[]).await.unwrap()[0];
        close(asum, x.iter().map(|v| v.abs()).sum());
    }
}
