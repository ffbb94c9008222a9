// kernels.matmul's route key made in C++ (kernels/route_key.py builds it; kernels/op.py calls it).
// route_key(a, b): bytes naming a's and b's ranks, sizes, strides, dtypes and devices, or None where
// no route may serve the call: an operand that is not exactly a torch.Tensor or a Parameter (a
// subclass, or not a tensor), a gradient to record, more than 8 dims. What the Python key of
// kernels/route_key.py's `python_key` tells apart, in one call: 60 ns against its 835 (2-core CPU host).
#include <torch/extension.h>
#include <torch/csrc/autograd/python_variable.h>

#include <ATen/core/grad_mode.h>

namespace {

constexpr int kMaxDims = 8;

PyObject* route_key(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "route_key(a, b) takes two arguments");
    return nullptr;
  }
  if (!THPVariable_CheckExact(args[0]) || !THPVariable_CheckExact(args[1])) Py_RETURN_NONE;
  const at::Tensor& a = THPVariable_Unpack(args[0]);
  const at::Tensor& b = THPVariable_Unpack(args[1]);
  if ((a.requires_grad() || b.requires_grad()) && at::GradMode::is_enabled()) Py_RETURN_NONE;
  int64_t words[2 * (3 + 2 * kMaxDims)];
  int n = 0;
  for (const at::Tensor* t : {&a, &b}) {
    const auto sizes = t->sizes();
    const auto strides = t->strides();
    if (sizes.size() > kMaxDims) Py_RETURN_NONE;
    words[n++] = static_cast<int64_t>(sizes.size());
    for (const int64_t size : sizes) words[n++] = size;
    for (const int64_t stride : strides) words[n++] = stride;
    words[n++] = static_cast<int64_t>(t->scalar_type());
    words[n++] = (static_cast<int64_t>(t->device().type()) << 16) | static_cast<uint16_t>(t->device().index());
  }
  return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(words), n * sizeof(int64_t));
}

PyMethodDef methods[] = {
    {"route_key", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(route_key)), METH_FASTCALL,
     "route_key(a, b) -> bytes, or None where no route may serve the call"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { PyModule_AddFunctions(m.ptr(), methods); }
