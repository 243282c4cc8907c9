//! Optimizers run on the servers: pushed gradients become weight updates next to the data,
//! with the optimizer's state kept in the model matrix's extra rows, as the matrix's training
//! description says.

use angel_client::{
    MatrixSpec, PsError, PushOptions, Sync, Training, UpdateRule, ValueType, optimizer_params,
};
use angel_tests::Cluster;

/// A description training with `optimizer` at `rate`.
fn trained(optimizer: &str, rate: f64) -> Training {
    Training::for_optimizer(optimizer_params(optimizer, rate))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sgd_and_adam_update_weights_and_state_on_the_servers() {
    let cluster = Cluster::start(2);
    let c = cluster.client().await;
    let keys = [3u64, 900, 4095];
    let sgd = MatrixSpec::dense("sgd_model", 1, 4096).value_type(ValueType::F64);
    c.create_matrix(sgd.training(trained("sgd", 0.1)))
        .await
        .unwrap();
    // Duplicate keys are summed: key 3 gets gradient 1.0 + 1.0.
    let grads = [1.0f64, -2.0, 0.5, 1.0];
    c.push_gradients("sgd_model", &[3, 900, 4095, 3], &grads)
        .await
        .unwrap();
    let w: Vec<f64> = c.pull_keys("sgd_model", 0, &keys).await.unwrap();
    assert_eq!(w, vec![-0.2, 0.2, -0.05]);

    // Adam keeps two moments in rows 1 and 2 and each key's update count in row 3; its first
    // step moves each weight by lr.
    let adam = MatrixSpec::sparse("adam_model", 4, 1 << 40).value_type(ValueType::F64);
    c.create_matrix(adam.training(trained("adam", 0.01)))
        .await
        .unwrap();
    let far = [7u64, 1 << 39, (1 << 40) - 1];
    c.push_gradients("adam_model", &far, &[4.0f64, -0.01, 2.0])
        .await
        .unwrap();
    let w: Vec<f64> = c.pull_keys("adam_model", 0, &far).await.unwrap();
    for (got, want) in w.iter().zip([-0.01, 0.01, -0.01]) {
        assert!((got - want).abs() < 1e-6, "{w:?}");
    }
    let m: Vec<f64> = c.pull_keys("adam_model", 1, &far).await.unwrap();
    assert!((m[0] - 0.4).abs() < 1e-12, "first moment {m:?}");
    let counts: Vec<f64> = c.pull_keys("adam_model", 3, &far).await.unwrap();
    assert_eq!(counts, vec![1.0; 3]);
}

/// A model of two outputs: two groups of a weights row and Adagrad's state row, all kept in
/// each block. One push updates both outputs' weights, each with its own state; a push aimed
/// at a state row is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_output_of_a_model_has_its_own_weights_and_state() {
    let cluster = Cluster::start(2);
    let c = cluster.client().await;
    let spec = MatrixSpec::dense("two", 4, 100)
        .value_type(ValueType::F64)
        .block_shape(4, 0)
        .training(trained("adagrad", 0.5));
    c.create_matrix(spec).await.unwrap();
    let how = PushOptions {
        gradients: true,
        ..Default::default()
    };
    let keys = [1u64, 99];
    c.push_with("two", &[0, 2], &keys, &[2.0f64, -1.0, 4.0, 0.5], how)
        .await
        .unwrap();
    let (w, _) = c
        .pull_at::<f64>("two", &[0, 1, 2, 3], &keys, None)
        .await
        .unwrap();
    // Adagrad's first step is lr * g / |g| = -lr * sign(g); its state g^2.
    let want = [-0.5, 0.5, 4.0, 1.0, -0.5, -0.5, 16.0, 0.25];
    for (got, want) in w.iter().zip(want) {
        assert!((got - want).abs() < 1e-6, "{w:?}");
    }
    let err = c
        .push_with("two", &[1], &keys, &[1.0f64, 1.0], how)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("the push names row 1"), "{err}");
}

/// Gradients need an optimizer in the matrix's description, and the master refuses a
/// description whose optimizer no server runs or whose matrix has no room for its state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gradients_without_an_optimizer_or_room_for_its_state_are_refused() {
    let cluster = Cluster::start(1);
    let c = cluster.client().await;
    c.create_matrix(MatrixSpec::dense("thin", 1, 16))
        .await
        .unwrap();
    let err = c.push_gradients("thin", &[1], &[1.0f32]).await.unwrap_err();
    assert!(matches!(err, PsError::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("'thin' has no optimizer"), "{err}");
    let thin_adam = MatrixSpec::dense("thin_adam", 1, 16).training(trained("adam", 0.1));
    let err = c.create_matrix(thin_adam).await.unwrap_err();
    assert!(matches!(err, PsError::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("needs 4 rows per output"), "{err}");
    let unknown = MatrixSpec::dense("unknown", 2, 16).training(trained("momentum9", 0.1));
    let err = c.create_matrix(unknown).await.unwrap_err();
    assert!(matches!(err, PsError::NotFound(_)), "{err}");
    assert!(err.to_string().contains("momentum9"), "{err}");
    let w: Vec<f32> = c.pull_keys("thin", 0, &[1]).await.unwrap();
    assert_eq!(w, vec![0.0], "a refused update changes nothing");
}

/// The update rules' factors, applied by the servers as the matrix's description says: ConSGD
/// multiplies the change the optimizer makes by 1/workers; DynSGD divides it by 1 + the
/// changes the partition took since the pull the gradient was computed from. Plain SGD at rate
/// 0.1 on gradient 1 moves a weight by -0.1, so the factors read off the weights exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consgd_and_dynsgd_factors_scale_the_change_on_the_servers() {
    let cluster = Cluster::start(1);
    let c = cluster.client().await;
    let ruled = |name: &str, update: UpdateRule| {
        let training = Training {
            update: update as i32,
            sync: Some(Sync {
                workers: 4,
                ..Default::default()
            }),
            ..trained("sgd", 0.1)
        };
        let spec = MatrixSpec::dense(name, 1, 10).value_type(ValueType::F64);
        spec.training(training)
    };
    c.create_matrix(ruled("consgd", UpdateRule::Consgd))
        .await
        .unwrap();
    c.create_matrix(ruled("dynsgd", UpdateRule::Dynsgd))
        .await
        .unwrap();
    c.push_gradients("consgd", &[1], &[1.0f64]).await.unwrap();
    // The pull a DynSGD gradient is computed from, then two changes by other workers.
    let (_, bases) = c.pull_at::<f64>("dynsgd", &[0], &[2], None).await.unwrap();
    for _ in 0..2 {
        c.push_keys("dynsgd", 0, &[2], &[0.0f64]).await.unwrap();
    }
    let how = PushOptions {
        gradients: true,
        bases: &bases,
        ..Default::default()
    };
    c.push_with("dynsgd", &[0], &[2], &[1.0f64], how)
        .await
        .unwrap();
    let consgd: Vec<f64> = c.pull_keys("consgd", 0, &[1]).await.unwrap();
    let dynsgd: Vec<f64> = c.pull_keys("dynsgd", 0, &[2]).await.unwrap();
    assert!(
        (consgd[0] - -0.1 * 0.25).abs() < 1e-12,
        "ConSGD, 4 workers: {consgd:?}"
    );
    assert!(
        (dynsgd[0] - -0.1 / 3.0).abs() < 1e-12,
        "DynSGD, 2 changes stale: {dynsgd:?}"
    );
}
