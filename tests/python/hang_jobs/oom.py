"""A CUDA job under `trainscope run --auto=memory` that runs out of device memory in its
third step (one tensor larger than the device), after a few steps of real training.
"""

import torch

model = torch.nn.Linear(256, 256).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loader = torch.utils.data.DataLoader([torch.randn(256) for _ in range(64)], batch_size=8)
for i, batch in enumerate(loader):
    loss = model(batch.cuda()).sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if i == 3:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.empty(2 * total, dtype=torch.uint8, device="cuda")  # OutOfMemoryError
