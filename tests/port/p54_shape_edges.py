"""Shape edge cases: `view` on non-contiguous tensors (error parity) vs `reshape`,
`expand` then in-place (error parity), `squeeze` of non-1 dims, `flatten` on 0-d,
`unflatten`, `movedim`, `contiguous`, `stride`, zero-size shapes."""

from tests.port import np_of
from tests.port.errcheck import err

RTOL = 1e-12


def run(torch, shared):
    out = {}
    x = torch.arange(24.0).reshape(2, 3, 4)
    xt = x.transpose(0, 2)
    out["contig"] = [x.is_contiguous(), xt.is_contiguous(), xt.contiguous().is_contiguous(),
                     list(x.stride()), list(xt.stride()), x.stride(1), x[:, 1].is_contiguous(),
                     x[1].is_contiguous(), x[..., ::2].is_contiguous()]
    out["view_noncontig"] = err(lambda: xt.view(-1), "view")
    out["view_ok"] = [np_of(xt.reshape(-1)), np_of(xt.contiguous().view(-1)), list(x.view(4, -1).shape),
                      np_of(x[:, 1].reshape(-1)), list(x.view(2, 12).shape), list(x.view(-1, 2, 2).shape),
                      list(x.view(torch.Size([6, 4])).shape), list(x.view((3, 8)).shape)]
    out["view_bad"] = [err(lambda: x.view(5, -1), "shape"), err(lambda: x.view(-1, -1)),
                       err(lambda: x.reshape(7)), list(x.reshape(-1, 1, 1).shape)]
    out["view_shares"] = None
    v = x.view(6, 4)
    v[0, 0] = 100.0
    out["view_shares"] = [x[0, 0, 0].item(), x.reshape(6, 4).data_ptr() == x.data_ptr()]
    e = torch.ones(3, 1).expand(3, 4)
    out["expand"] = [list(e.shape), list(e.stride()), e.is_contiguous(),
                     list(torch.ones(1, 3).expand(2, -1, -1).shape), list(torch.ones(4).expand_as(x).shape)]
    out["expand_inplace"] = err(lambda: e.add_(1), "single memory location")
    out["expand_bad"] = [err(lambda: torch.ones(2, 3).expand(4, 3)), err(lambda: torch.ones(3).expand(2))]
    out["expand_clone"] = np_of(e.clone().add_(1))
    s = torch.zeros(1, 3, 1, 2)
    out["squeeze"] = [list(s.squeeze().shape), list(s.squeeze(1).shape), list(s.squeeze(0).shape),
                      list(s.squeeze(-2).shape), list(s.squeeze((0, 2)).shape), list(s.squeeze((1, 3)).shape),
                      list(torch.zeros(3).squeeze(0).shape), list(torch.tensor(5.0).squeeze().shape),
                      list(torch.tensor(5.0).squeeze(0).shape), list(torch.tensor(5.0).unsqueeze(0).shape)]
    out["squeeze_bad"] = [err(lambda: s.squeeze(4)), err(lambda: s.unsqueeze(6))]
    z = torch.tensor(3.0)
    out["zero_d"] = [list(z.flatten().shape), list(z.flatten(0).shape), list(z.reshape(1).shape),
                     list(z.view(1, 1).shape), list(z.ravel().shape), z.dim(), z.numel(), list(z.shape),
                     list(z[None].shape), list(z[...].shape), z.ndim, list(z.unsqueeze(-1).shape),
                     err(lambda: z.flatten(1)), err(lambda: len(z)), err(lambda: z[0])]
    out["flatten"] = [list(x.flatten(1).shape), list(x.flatten(0, 1).shape), list(x.flatten(-2).shape),
                      list(x.unflatten(2, (2, 2)).shape), list(x.unflatten(-1, (-1, 2)).shape),
                      list(x.movedim(0, -1).shape), list(torch.movedim(x, (0, 1), (2, 0)).shape),
                      list(x.moveaxis(2, 0).shape), list(x.swapaxes(0, 1).shape), list(x.mT.shape)]
    empty = torch.zeros(0, 4)
    out["zero_size"] = [list(empty.reshape(0, 2, 2).shape), list(empty.view(-1, 4).shape),
                        list(torch.cat([empty, torch.ones(2, 4)]).shape), list(empty.sum(0).shape),
                        list(empty.T.shape), list(empty[:, :2].shape), err(lambda: empty.view(-1)),
                        list(torch.zeros(2, 0).reshape(0).shape), list(torch.stack([empty, empty], 1).shape)]
    out["split_sizes"] = [[list(p.shape) for p in x.split([1, 3], dim=2)],
                          [list(p.shape) for p in torch.tensor_split(torch.arange(7), 3)],
                          [list(p.shape) for p in x.unbind(1)], [list(p.shape) for p in torch.chunk(torch.arange(5), 3)],
                          err(lambda: x.split([1, 2], dim=2))]
    out["cat_errors"] = [err(lambda: torch.cat([torch.ones(2, 3), torch.ones(2, 4)])),
                         err(lambda: torch.stack([torch.ones(2), torch.ones(3)])), err(lambda: torch.cat([]))]
    out["permute_bad"] = [err(lambda: x.permute(0, 1)), err(lambda: x.permute(0, 1, 1)),
                          err(lambda: x.transpose(0, 3))]
    out["repeat"] = [list(x.repeat(2, 1, 1).shape), list(torch.ones(3).repeat(2, 2).shape),
                     np_of(torch.tensor([1, 2]).repeat_interleave(torch.tensor([2, 3]))),
                     np_of(torch.arange(4).reshape(2, 2).repeat_interleave(2, dim=0)), err(lambda: x.repeat(2))]
    out["more_splits"] = [[list(p.shape) for p in x.dsplit(2)], [list(p.shape) for p in torch.dsplit(x, [1, 3])],
                          np_of(x.narrow_copy(1, 1, 2)), x.is_same_size(x.clone()), np_of(x.rot90(1, (1, 2))),
                          np_of(x.logcumsumexp(2)), err(lambda: torch.dsplit(torch.ones(2, 2), 2))]
    out["tile_roll"] = [list(torch.ones(2, 3).tile((2,)).shape), np_of(torch.arange(6).reshape(2, 3).roll(1, 1)),
                        np_of(torch.arange(6).roll(-2)), np_of(torch.rot90(torch.arange(4).reshape(2, 2)))]
    out["size_api"] = [x.size(-1), x.shape[-2], list(x.size()[1:]), x.shape.numel(), isinstance(x.shape, tuple),
                       x.size() == (2, 3, 4), list(torch.Size([2, 3]) + torch.Size([4])), len(x.shape)]
    return out
