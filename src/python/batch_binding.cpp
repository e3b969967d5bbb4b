// sluice.Batch and sluice.Tensor: a batch's data and labels leave Python as DLPack capsules that
// share the batch's memory (torch.from_dlpack(batch.data) copies nothing). Every DLManagedTensor
// holds the batch's BatchHold through its manager_ctx, so the slot stays out of the ring until
// the Batch object, its Tensor views and every consumer tensor made from them are all gone.
//
// The deleter touches no Python object: consumers (torch) may call it without the GIL, from any
// thread; dropping a shared_ptr is all it does.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include <dlpack/dlpack.h>
#include <pybind11/stl.h>

#include "c/dlpack_export.hpp"  // the DLPack export the C API shares
#include "python_module.hpp"
#include "sluice/core/error.hpp"

namespace sluice::python {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kU8: return "uint8";
    case DType::kI32: return "int32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kF32: return "float32";
  }
  return "unknown";
}

dlpack::TensorDesc describe(const TensorRef& tensor) {
  if (!tensor.hold) throw Error(ErrorCode::kInvalidArgument, "the batch was released");
  return dlpack::describe(tensor.hold->batch, tensor.labels ? dlpack::BatchPart::kLabels : dlpack::BatchPart::kData);
}

namespace {

using dlpack::dl_device;

extern "C" {
// A capsule nobody consumed still owns its tensor. A consumer renames it "used_dltensor" and
// calls the deleter itself, later. Keeps any exception in flight: capsules die during unwinding.
static void delete_capsule(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  PyErr_Restore(type, value, traceback);
}
}  // extern "C"

// Python's __dlpack__ stream argument as a cudaStream_t: 1 is the legacy default stream (nullptr),
// 2 the per-thread default (whose handle is 2), others the handle; -1 asks for no sync.
std::optional<void*> native_stream(const py::object& stream) {
  if (stream.is_none()) return nullptr;
  const auto value = stream.cast<std::intptr_t>();
  if (value == -1) return std::nullopt;
  if (value == 0) throw Error(ErrorCode::kInvalidArgument, "__dlpack__: stream 0 is ambiguous, pass 1 for the legacy default stream");
  if (value == 1) return nullptr;
  return reinterpret_cast<void*>(value);
}

py::capsule to_dlpack(const TensorRef& tensor, const py::object& stream) {
  const dlpack::TensorDesc d = describe(tensor);
  if (d.device.is_cuda()) {
    // The loader's stream already waits for the batch's copy; another stream must wait too, and
    // the slot's reuse must wait for that stream's work: the release is recorded on it as well
    // (the shared export's use_on_stream). stream=-1 (no synchronisation) leaves both to the
    // consumer.
    const std::optional<void*> s = native_stream(stream);
    if (s && *s != tensor.hold->core->cuda_stream) {
      py::gil_scoped_release release;
      dlpack::use_on_stream(tensor.hold->batch, *s);
    }
  }
  // The tensor holds the BatchHold: the slot stays out of the ring until every consumer let go.
  DLManagedTensor* managed = dlpack::export_tensor(d, tensor.hold);
  PyObject* capsule = PyCapsule_New(managed, "dltensor", &delete_capsule);
  if (capsule == nullptr) {
    managed->deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

py::tuple shape_tuple(const Shape& shape) {
  py::tuple out(static_cast<std::size_t>(shape.rank()));
  for (int i = 0; i < shape.rank(); ++i) out[static_cast<std::size_t>(i)] = shape[i];
  return out;
}

const std::shared_ptr<BatchHold>& held(const BatchRef& batch) {
  if (!batch.hold) throw Error(ErrorCode::kInvalidArgument, "the batch was released");
  return batch.hold;
}

std::string device_string(DeviceId device) { return to_string(device); }

}  // namespace

void bind_batch(py::module_& m) {
  py::class_<TensorRef>(m, "Tensor",
                        "A batch's data or labels: export it with torch.from_dlpack(t) or numpy.from_dlpack(t) "
                        "(no copy). The batch's slot stays held while this view or any tensor made from it lives.")
      .def(
          "__dlpack__",
          [](const TensorRef& t, py::object stream, py::object max_version, py::object device, py::object copy) {
            (void)max_version;  // sluice exports the unversioned DLManagedTensor (DLPack 0.x)
            if (!copy.is_none() && copy.cast<bool>()) {
              PyErr_SetString(PyExc_BufferError, "sluice tensors are exported without a copy; copy=True is not supported");
              throw py::error_already_set();
            }
            if (!device.is_none()) {
              const auto wanted = device.cast<std::pair<int, int>>();
              const DLDevice have = dl_device(describe(t).device);
              if (wanted.first != have.device_type || wanted.second != have.device_id) {
                PyErr_SetString(PyExc_BufferError, "sluice tensors are exported on their own device only");
                throw py::error_already_set();
              }
            }
            return to_dlpack(t, stream);
          },
          py::arg("stream") = py::none(), py::kw_only(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
          "A DLPack capsule sharing the batch's memory. On CUDA, `stream` (1: the legacy default "
          "stream, 2: per-thread, else a cudaStream_t) is made to wait for the batch's copy, and the "
          "batch's slot is refilled only after the work queued on it by the time the batch is released.")
      .def("__dlpack_device__",
           [](const TensorRef& t) {
             const DLDevice d = dl_device(describe(t).device);
             return py::make_tuple(static_cast<int>(d.device_type), d.device_id);
           })
      .def_property_readonly(
          "data_ptr", [](const TensorRef& t) { return reinterpret_cast<std::uintptr_t>(describe(t).data); },
          "The address of the first element (what torch's data_ptr() gives for the shared tensor).")
      .def_property_readonly("shape", [](const TensorRef& t) { return shape_tuple(describe(t).shape); })
      .def_property_readonly("ndim", [](const TensorRef& t) { return describe(t).shape.rank(); })
      .def_property_readonly("dtype", [](const TensorRef& t) { return dtype_name(describe(t).dtype); })
      .def_property_readonly("nbytes",
                             [](const TensorRef& t) {
                               const dlpack::TensorDesc d = describe(t);
                               return static_cast<std::int64_t>(d.shape.elements()) * static_cast<std::int64_t>(size_of(d.dtype));
                             })
      .def_property_readonly("device", [](const TensorRef& t) { return device_string(describe(t).device); })
      .def("__repr__", [](const TensorRef& t) {
        if (!t.hold) return std::string("<sluice.Tensor of a released batch>");
        const dlpack::TensorDesc d = describe(t);
        return "<sluice.Tensor " + d.shape.to_string() + " " + dtype_name(d.dtype) + " on " + device_string(d.device) + ">";
      });

  py::class_<BatchRef>(m, "Batch",
                       "One batch: `data` (N, C, H, W) or (N, H, W, C) and `labels` (N,) int32 (with a mixup or "
                       "cutmix stage: float32 (N, num_classes), the mixed one-hot rows), exported with DLPack. Its ring slot returns when this object, its tensors and every tensor made from "
                       "them are released (or after release(), once the tensors are).")
      .def_property_readonly("data", [](const BatchRef& b) { return TensorRef{held(b), false}; })
      .def_property_readonly("labels", [](const BatchRef& b) { return TensorRef{held(b), true}; })
      .def_property_readonly("data_ptr",
                             [](const BatchRef& b) { return reinterpret_cast<std::uintptr_t>(describe(TensorRef{held(b), false}).data); },
                             "Same as batch.data.data_ptr.")
      .def_property_readonly("size", [](const BatchRef& b) { return held(b)->batch.size(); },
                             "Samples in the batch (the last of an epoch may be short).")
      .def("__len__", [](const BatchRef& b) { return held(b)->batch.size(); })
      .def_property_readonly("epoch", [](const BatchRef& b) { return held(b)->batch.epoch(); })
      .def_property_readonly("index", [](const BatchRef& b) { return held(b)->batch.index(); },
                             "The batch's position in its epoch.")
      .def_property_readonly("padding", [](const BatchRef& b) { return held(b)->batch.padding(); },
                             "How many of the batch's last samples repeat earlier ones: a rank short of samples at "
                             "the end of an epoch pads its last batch so every rank yields as many batches "
                             "(docs/distributed.md); 0 otherwise.")
      .def_property_readonly("device", [](const BatchRef& b) {
        const Batch& batch = held(b)->batch;
        return device_string(batch.on_device() ? batch.device() : host());
      })
      .def_property_readonly("ready_event", [](const BatchRef& b) {
        const Batch& batch = held(b)->batch;
        return reinterpret_cast<std::uintptr_t>(batch.on_device() && batch.device().is_cuda() ? batch.ready_event() : nullptr);
      }, "On CUDA: the cudaEvent_t the batch's copy recorded (the loader's stream waits on it); else 0.")
      .def_property_readonly("released", [](const BatchRef& b) { return !b.hold; })
      .def("release", [](BatchRef& b) { b.hold.reset(); },
           "Drops this object's hold now; tensors already taken keep the slot until they are freed.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](BatchRef& b, py::args) { b.hold.reset(); })
      .def("__repr__", [](const BatchRef& b) {
        if (!b.hold) return std::string("<sluice.Batch (released)>");
        const Batch& batch = b.hold->batch;
        return "<sluice.Batch epoch " + std::to_string(batch.epoch()) + " index " + std::to_string(batch.index()) +
               ", " + std::to_string(batch.size()) + " samples>";
      });
}

}  // namespace sluice::python
