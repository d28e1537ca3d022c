"""What a capture's event is, from its name: a GPU kernel's tensor cores and precision,
whether it is a convolution or a matrix product, a copy's direction and host memory
(kernels.py); what a host event says the host was doing (host.py). On real names: those
in the committed captures (read from them here, so they stay real), and public cuBLAS
and cuDNN kernel names as NVIDIA's libraries spell them in profiles."""

from __future__ import annotations

import pytest

from gpuwhy.collect.capture import host, kernels, xspace
from tests.collect.capture.reference import CAPTURES


def names_of(capture: str, plane: str) -> set[str]:
    found = xspace.read(CAPTURES[capture]).plane(plane)
    assert found is not None
    return set(found.names.values())


@pytest.fixture(scope="module")
def h100_kernels() -> set[str]:
    return names_of("h100_slow_input", "/device:GPU:0")


# -- the H100 capture's kernels (cuDNN's TF32 convolutions under XLA) ----------------------
TF32_CONVOLUTIONS = (
    "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x64x32_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
    "sm90_xmma_dgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize256x64x32_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
    "sm90_xmma_wgrad_indexed_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x64x32_warpgroupsize1x1x1_g1_execute_segment_k_on_kernel__5x_cudnn",
    "sm90_xmma_wgrad_indexed_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x64x32_warpgroupsize1x1x1_g1_execute_split_k_kernel__5x_cudnn",
    "sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x32x16_stage1_warpsize4x1x1_g1_tensor16x8x8_aligna4_alignc8_execute_kernel__5x_cudnn",
)


@pytest.mark.parametrize("name", TF32_CONVOLUTIONS, ids=lambda n: n[:30])
def test_the_h100_captures_xmma_convolutions_are_tf32_tensor_core_matmuls(name, h100_kernels):
    assert name in h100_kernels
    assert kernels.tensor_core(name) == "tf32"
    assert kernels.is_matmul(name)
    assert kernels.copy_direction(name) is None and not kernels.is_memset(name)


def test_every_xmma_convolution_of_the_h100_capture_is_listed_above(h100_kernels):
    convolutions = {n for n in h100_kernels if n.startswith("sm") and "_xmma_" in n}
    assert convolutions == set(TF32_CONVOLUTIONS)


@pytest.mark.parametrize(
    ("name", "matmul"),
    [
        ("loop_add_divide_fusion", False),
        ("loop_maximum_fusion", False),
        ("input_reduce_select_fusion_1", False),
        ("input_transpose_fusion", False),
        ("wrapped_transpose", False),
        ("memcpy32_post", False),
        (
            "void cudnn::engines_precompiled::convertTensor_kernel<float, float, float, (cudnnKernelDataType_t)2>(float, float const*, float, float*, unsigned long)",
            False,  # a layout conversion around the convolution, not one
        ),
        (
            "void wgrad_alg0_engine_NHWC<float, 128, 5, 5, 3, 3, 3, false, 512>(int, int, int, float const*, int, float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)",
            True,  # cuDNN's FP32 weight gradient: a convolution without tensor cores
        ),
    ],
    ids=lambda v: str(v)[:30],
)
def test_the_h100_captures_other_kernels_use_no_tensor_cores(name, matmul, h100_kernels):
    assert name in h100_kernels
    assert kernels.tensor_core(name) is None
    assert kernels.is_matmul(name) is matmul


@pytest.mark.parametrize("name", ["gemm_fusion_dot", "gemm_fusion_dot_general_3"])
def test_xlas_triton_gemm_fusions_are_tensor_core_matmuls_of_unnamed_precision(name, h100_kernels):
    # the name does not say the operands' type: "" (tensor cores, precision not said)
    assert name in h100_kernels
    assert kernels.tensor_core(name) == ""
    assert kernels.is_matmul(name)


@pytest.mark.parametrize(
    ("name", "direction"),
    [
        ("MemcpyH2D", "host_to_device"),
        ("MemcpyD2H", "device_to_host"),
        ("MemcpyD2D", "device_to_device"),
    ],
)
def test_the_h100_captures_copies_have_their_direction(name, direction, h100_kernels):
    assert name in h100_kernels
    assert kernels.copy_direction(name) == direction
    assert not kernels.is_memset(name)


def test_the_h100_captures_memset_is_no_copy_and_no_kernel(h100_kernels):
    assert "Memset 3" in h100_kernels
    assert kernels.is_memset("Memset 3")
    assert kernels.copy_direction("Memset 3") is None


def memcpy_details(capture: str, plane: str) -> set[str]:
    space = xspace.read(CAPTURES[capture], lambda p, name: name.startswith("Memcpy"))
    found = space.plane(plane)
    assert found is not None
    return {
        stats["memcpy_details"]
        for line in found.lines
        for stats in line.stats.values()
        if "memcpy_details" in stats
    }


def test_the_h100_captures_copy_details_read_as_pinned_with_their_sizes():
    details = memcpy_details("h100_slow_input", "/device:GPU:0")
    batch = "kind_src:pinned kind_dst:device size:3145728 dest:0 async:1"  # 64x64x64x3 float32
    result = "kind_src:device kind_dst:pinned size:4 dest:0 async:1"
    on_device = "kind_src:device kind_dst:device size:4 dest:0 async:1"
    assert {batch, result, on_device} <= details
    assert kernels.copy_bytes(batch) == 3145728
    assert kernels.copy_pageable(batch) is False
    assert kernels.copy_bytes(result) == 4
    assert kernels.copy_pageable(result) is False
    assert kernels.copy_pageable(on_device) is None  # no host side
    assert all(kernels.copy_pageable(d) is not True for d in details)


@pytest.mark.parametrize(
    ("details", "pageable", "size"),
    [
        ("kind_src:pageable kind_dst:device size:1048576 dest:0 async:0", True, 1048576),
        ("kind_src:device kind_dst:pageable size:40 dest:0 async:0", True, 40),
        ("kind_src:pinned kind_dst:device size:256 dest:0 async:1", False, 256),
        ("", None, 0),
    ],
)
def test_pageable_copies_are_told_from_pinned_ones(details, pageable, size):
    # XProf writes CUPTI's memory kinds: pageable, pinned, device, array, managed...
    assert kernels.copy_pageable(details) is pageable
    assert kernels.copy_bytes(details) == size


def test_a_copy_of_unknown_host_memory_is_neither_pageable_nor_pinned():
    # the H100 capture's own host-side copy launches carry this
    details = memcpy_details("h100_slow_input", "/host:CPU")
    unknown = "kind_src:unknown kind_dst:unknown size:3145728 dest:0 async:1"
    assert unknown in details
    assert kernels.copy_pageable(unknown) is None


# -- public cuBLAS / cuDNN kernel names ------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "precision", "matmul"),
    [
        # FP32 SIMT GEMMs: no tensor cores
        ("ampere_sgemm_128x64_nn", None, True),
        ("volta_sgemm_128x64_nn", None, True),
        ("maxwell_sgemm_128x64_nt", None, True),
        # cuBLAS tensor-core GEMMs, precision in the name
        (
            "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel",
            "bf16",
            True,
        ),
        (
            "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
            "fp16",
            True,
        ),
        ("volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", "fp16", True),
        ("turing_fp16_s1688gemm_fp16_256x128_ldg8_f2f_tn", "fp16", True),
        ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn", "fp16", True),
        ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn", "bf16", True),
        ("cutlass_80_tensorop_i16832gemm_s8_256x128_64x3_tn_align16", "int8", True),
        # cuDNN's TF32 convolution on Ampere
        (
            "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_kernel",
            "tf32",
            True,
        ),
        # not matrix products
        ("cutlass_80_splitKreduce_kernel", None, False),
        ("cudnn::detail::bn_bw_1C11_kernel", None, False),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
            None,
            False,
        ),
    ],
    ids=lambda v: str(v)[:40],
)
def test_public_kernel_names(name, precision, matmul):
    assert kernels.tensor_core(name) == precision
    assert kernels.is_matmul(name) is matmul


@pytest.mark.parametrize(
    ("name", "precision"),
    [
        ("volta_h884gemm_64x64_ldg8_nn", "fp16"),
        ("turing_h1688gemm_128x128_ldg8_nt", "fp16"),
        ("ampere_h1688gemm_128x128_ldg8_stages_32x1_tn", "fp16"),
        ("ampere_h16816gemm_128x64_ldg8_stages_64x3_tn", "fp16"),
        ("ampere_int8_i16832gemm_int8_256x128_ldg16_relu_mods_stages_64x3_nt", "int8"),
    ],
)
def test_cublas_half_and_int8_tensor_core_gemms(name, precision):
    assert kernels.tensor_core(name) == precision


@pytest.mark.parametrize(
    "name",
    ["nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT", "nvjet_tst_64x64_64x8_2x1_v_bz_splitK_TNT"],
)
def test_cublas_hopper_nvjet_gemms_are_tensor_core_matmuls(name):
    assert kernels.is_matmul(name)
    assert kernels.tensor_core(name) is not None


@pytest.mark.parametrize(
    "name",
    [
        "volta_scudnn_128x64_relu_interior_nn_v1",
        "maxwell_scudnn_128x64_relu_interior_nn_v1",
        "volta_fp16_s884cudnn_fp16_128x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1",
    ],
)
def test_cudnn_implicit_gemm_convolutions_are_matmuls(name):
    assert kernels.is_matmul(name)


def test_cudnns_workspace_initialiser_is_no_tensor_core_matmul(h100_kernels):
    (name,) = [n for n in h100_kernels if "init_device_workspace_kernel" in n]
    assert kernels.tensor_core(name) is None
    assert not kernels.is_matmul(name)


# -- host events ---------------------------------------------------------------------------------
def host_events(capture: str) -> set[tuple[str, str, str | None]]:
    """(thread without its id, event name, display name) of every host event in a capture."""
    space = xspace.read(CAPTURES[capture])
    plane = space.plane("/host:CPU")
    assert plane is not None
    return {
        (line.name.split("/")[0], plane.names.get(int(i), ""), plane.display.get(int(i)))
        for line in plane.lines
        for i in set(line.ids.tolist())
    }


@pytest.fixture(scope="module")
def keras_fit() -> set[tuple[str, str, str | None]]:
    return host_events("keras_fit_slow_generator")


@pytest.fixture(scope="module")
def custom_loop() -> set[tuple[str, str, str | None]]:
    return host_events("custom_loop_step_markers")


def test_the_consumers_get_next_is_input_on_its_thread_and_on_pythons(keras_fit, custom_loop):
    fit_wait = ("tf_data_iterator_get_next", "IteratorGetNextOp::DoCompute", None)
    loop_wait = ("python", "IteratorGetNextOp::DoCompute", None)
    eager = ("python", "EagerLocalExecute: IteratorGetNext", None)
    assert fit_wait in keras_fit and loop_wait in custom_loop and eager in custom_loop
    for thread, name, display in (fit_wait, loop_wait, eager):
        assert host.activity(name, thread, display) == "input"
    # an IteratorGetNext op kernel (TF's executor names a kernel "node:OpType")
    assert host.op_kernel("IteratorGetNext", "IteratorGetNext") is None  # no node: no kernel
    assert host.op_kernel("IteratorGetNext:IteratorGetNext", "IteratorGetNext") == (
        "IteratorGetNext",
        "IteratorGetNext",
    )
    assert host.activity("IteratorGetNext:IteratorGetNext", "tf_Compute", "IteratorGetNext") == (
        "input"
    )


def test_a_loss_op_kernel_is_compute_whatever_its_node_name_says(keras_fit):
    # "compile_loss/..." would read as compiling by name: the op type decides
    names = [
        (thread, name, display)
        for thread, name, display in keras_fit
        if "compile_loss/" in name and name.endswith(":Mul")
    ]
    assert names, "the Keras fit capture has its loss's Mul kernels"
    for thread, name, display in names:
        assert thread == "tf_Compute" and display == "Mul"
        node, kind = host.op_kernel(name, display)
        assert kind == "Mul" and node == name.rpartition(":")[0]
        assert "compile_loss/" in node
        assert host.activity(name, thread, display) == "compute"


def test_tf_datas_producer_threads_are_input_ahead_of_the_step(keras_fit, custom_loop):
    generator = ("tf_data_private_threadpool", "PyFunc:PyFunc", "PyFunc")
    standardize = (
        "tf_data_private_threadpool",
        "per_image_standardization/sub:Sub",
        "Sub",
    )
    assert generator in keras_fit and standardize in custom_loop
    for thread, name, display in (generator, standardize):
        assert host.activity(name, thread, display) == host.BACKGROUND_INPUT
    producers = [e for e in keras_fit | custom_loop if e[0] == "tf_data_private_threadpool"]
    assert len(producers) > 10
    for thread, name, display in producers:  # bookkeeping aside, all of it
        assert host.activity(name, thread, display) in (host.BACKGROUND_INPUT, None), name


def test_the_profilers_bookkeeping_is_no_activity(keras_fit):
    threads = {thread for thread, name, _ in keras_fit if name == "ThreadpoolListener::Record"}
    assert threads  # on the Python thread and TF's pools
    for thread in threads:
        assert host.activity("ThreadpoolListener::Record", thread) is None


def test_the_python_tracers_next_is_input_and_its_frames_are_read():
    events = host_events("h100_slow_input")
    assert ("python3", "$builtins next", None) in events
    assert host.activity("$builtins next", "python3") == "input"
    assert host.frame("$builtins next") is None  # a builtin: no file
    assert ("python3", "$xplane_capture.py:14 slow", None) in events
    assert host.frame("$xplane_capture.py:14 slow") == ("slow", "xplane_capture.py", 14)
    assert host.activity("$xplane_capture.py:14 slow", "python3") == "python"
    assert host.op_kernel("$xplane_capture.py:14 slow", None) is None


def test_tfs_underscore_op_types_are_op_kernels_and_compute(custom_loop):
    event = (
        "tf_Compute",
        "sequential_1/conv2d_1/Relu:_MklNativeFusedConv2D",
        "_MklNativeFusedConv2D",
    )
    assert event in custom_loop
    _, name, display = event
    assert host.op_kernel(name, display) == ("sequential_1/conv2d_1/Relu", "_MklNativeFusedConv2D")
    assert host.activity(name, "tf_Compute", display) == "compute"


@pytest.mark.parametrize(
    "name",
    [
        # cuBLAS's FP32 SIMT GEMM of the xmma family: CUDA cores (TF32 turned off)
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel_trt",
        "ampere_sgemm_128x64_nn",
    ],
)
def test_fp32_kernels_of_tensor_core_families_are_no_tensor_cores(name):
    assert kernels.tensor_core(name) is None
    assert kernels.is_matmul(name)


def test_a_cast_whose_template_arguments_say_conv_is_no_matmul():
    cast = (
        "void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<Eigen::TensorAssignOp<"
        "Eigen::TensorMap<Eigen::Tensor<Eigen::half, 1, 1, long>, 16>, "
        "Eigen::TensorConversionOp<Eigen::half, Eigen::TensorMap<Eigen::Tensor<float const, 1, 1, "
        "long>, 16> const> const> const, Eigen::GpuDevice>, long>(Eigen::TensorEvaluator<...>, long)"
    )
    assert not kernels.is_matmul(cast)
    assert kernels.tensor_core(cast) is None
