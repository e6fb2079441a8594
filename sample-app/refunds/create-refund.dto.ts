import { IsInt, IsPositive, Max } from 'class-validator';

/** Body of `POST /payments/:id/refunds`. */
export class CreateRefundDto {
  /** Minor units; at most what is left to refund. */
  @IsInt()
  @IsPositive()
  @Max(2_147_483_647)
  amount!: number;
}
